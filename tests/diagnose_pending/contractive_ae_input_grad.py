"""A contractive autoencoder whose penalty reads x.grad after a backward through the encoder.

Rebuilt from the structure of forum threads on contractive autoencoders (Rifai et al. 2011) in
PyTorch: to get the encoder's sensitivity to its input, the script marks the batch with
`requires_grad_()`, encodes it, calls `code.backward(torch.ones_like(code))` to fill `x.grad`,
zeroes the parameters' gradients that call left, and adds the squared input gradient to the
reconstruction loss before `loss.backward()`. The first backward went through the encoder's
graph and freed it; the reconstruction term needs it again. retain_graph=True on the first
call would run but train nothing through the penalty: `x.grad` is a plain tensor without a
graph, so the penalty is a constant. The fix: take the input gradient as part of the graph,
`(jac,) = torch.autograd.grad(code, x, torch.ones_like(code), create_graph=True)`, build the
penalty from it, and call backward once on the total.
"""

# expect-cause: shared-forward
# expect-fix: create_graph=True
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(30, 64), nn.Softplus(), nn.Linear(64, 8), nn.Sigmoid())
decoder = nn.Sequential(nn.Linear(8, 64), nn.Softplus(), nn.Linear(64, 30))
opt = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-3)
lam = 1e-2
data = torch.randn(64, 30)
for epoch in range(2):
    for x in data.split(16):
        x = x.clone().requires_grad_()
        code = encoder(x)  # expect: forward
        code.backward(torch.ones_like(code))  # expect: frees
        opt.zero_grad()
        contractive = x.grad.pow(2).sum(dim=1).mean()
        recon = nn.functional.mse_loss(decoder(code), x.detach())
        loss = recon + lam * contractive
        loss.backward()  # expect: raises
        opt.step()
    print(f"epoch {epoch}: recon {recon.item():.4f} contractive {contractive.item():.4f}")
