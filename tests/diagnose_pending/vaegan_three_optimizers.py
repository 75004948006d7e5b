"""A VAE/GAN with three optimizers, each loss's backward kept with retain_graph=True, then a step.

Rebuilt from the structure of issue-tracker reports against VAE/GAN implementations (Larsen et
al. 2016) that broke on torch 1.5: one forward pass encodes the batch, decodes it and a prior
sample, and runs the discriminator on all three; the encoder's loss (KL plus the feature-space
reconstruction at a discriminator layer), the decoder's loss and the discriminator's loss each
get `backward(retain_graph=True)` and their own optimizer's `step()`, in that order. The
decoder's loss goes back through the feature reconstruction into the encoder, whose weights
`optimizer_encoder.step()` has just changed in place: "modified by an inplace operation".
The fix: take every network's gradient from its own loss before any step, e.g.
`loss_encoder.backward(inputs=enc_params, retain_graph=True)`, the same for the decoder,
`loss_discriminator.backward(inputs=dis_params)`, then step all three (or run the forward
pass again after each step). Adding the losses and calling backward once would train each
network on the others' objectives.
"""

# expect-cause: inplace-after-retain
# expect-not-fix: add the losses
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
z_dim, lambda_mse = 4, 1e-2
encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2 * z_dim))
decoder = nn.Sequential(nn.Linear(z_dim, 32), nn.ReLU(), nn.Linear(32, 16))
dis_body = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2))
dis_head = nn.Linear(32, 1)
optimizer_encoder = torch.optim.RMSprop(encoder.parameters(), lr=3e-4)
optimizer_decoder = torch.optim.RMSprop(decoder.parameters(), lr=3e-4)
dis_params = [*dis_body.parameters(), *dis_head.parameters()]
optimizer_discriminator = torch.optim.RMSprop(dis_params, lr=3e-4)
nets = (encoder, decoder, dis_body, dis_head)
for step in range(3):
    x = torch.rand(8, 16)
    mu, logvar = encoder(x).chunk(2, dim=1)  # expect: forward
    z = mu + (0.5 * logvar).exp() * torch.randn_like(mu)
    x_tilde, x_p = decoder(z), decoder(torch.randn_like(z))
    layer = dis_body(torch.cat([x, x_tilde, x_p]))
    d_x, d_tilde, d_p = dis_head(layer).chunk(3)
    layer_x, layer_tilde, _ = layer.chunk(3)
    nle = 0.5 * (layer_tilde - layer_x.detach()).pow(2).sum(1).mean()
    kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1).mean()
    bce = F.binary_cross_entropy_with_logits
    loss_discriminator = (
        bce(d_x, torch.ones_like(d_x))
        + bce(d_tilde, torch.zeros_like(d_tilde))
        + bce(d_p, torch.zeros_like(d_p))
    )
    loss_encoder = kl + nle
    loss_decoder = lambda_mse * nle - loss_discriminator
    for net in nets:
        net.zero_grad()
    loss_encoder.backward(retain_graph=True)  # expect: kept
    optimizer_encoder.step()  # expect: changed
    for net in nets:
        net.zero_grad()
    loss_decoder.backward(retain_graph=True)  # expect: raises
    optimizer_decoder.step()
    dis_body.zero_grad()
    dis_head.zero_grad()
    loss_discriminator.backward()
    optimizer_discriminator.step()
    print(f"step {step}: enc {loss_encoder.item():.4f} dec {loss_decoder.item():.4f}")
