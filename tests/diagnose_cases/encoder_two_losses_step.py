"""An autoencoder with a classifier on its code, with an optimizer step after each of its losses.

Rebuilt from the structure of forum reports of semi-supervised autoencoders ("train the
reconstruction, then the classification"): one nn.Sequential encoder's output `z` feeds a
decoder and a classifier; the reconstruction loss goes back, the optimizer steps, and the
classification loss's backward needs the encoder's graph the first backward freed. The fix:
add the two losses and call backward once, then step once (or, to keep two updates, run the
encoder again after the step for the second loss). retain_graph=True on the first call, which
the message suggests, only trades this error for the in-place one: `opt.step()` changes the
encoder's saved weights in between (encoder_two_losses_retain_step.py). One optimizer trains
encoder, decoder and classifier alike, so `z.detach()` in the classification loss is no fix: it
would silently stop that loss from training the encoder.
"""

# expect-cause: shared-forward
# expect-fix: once
# expect-not-fix: pass retain_graph=True to the first call
# expect-not-fix: z.detach()
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(
    nn.Linear(30, 64), nn.LayerNorm(64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 8)
)
decoder = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 30))
classifier = nn.Linear(8, 4)
params = [*encoder.parameters(), *decoder.parameters(), *classifier.parameters()]
opt = torch.optim.Adam(params, lr=1e-3)
for step in range(3):
    x, y = torch.randn(16, 30), torch.randint(0, 4, (16,))
    z = encoder(x)  # expect: forward
    recon_loss = nn.functional.mse_loss(decoder(z), x)
    cls_loss = nn.functional.cross_entropy(classifier(z), y)
    opt.zero_grad()
    recon_loss.backward()  # expect: frees
    opt.step()
    opt.zero_grad()
    cls_loss.backward()  # expect: raises
    opt.step()
    print(f"step {step}: recon {recon_loss.item():.4f} cls {cls_loss.item():.4f}")
