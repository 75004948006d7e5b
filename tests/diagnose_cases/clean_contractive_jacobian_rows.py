"""Clean: a contractive autoencoder whose Jacobian penalty is built row by row with autograd.grad.

Rebuilt from the structure of tutorial and forum code for contractive autoencoders (Rifai et
al. 2011) done with autograd rather than the closed form: for each code unit j the input
gradient `d code[:, j] / d x` is taken with `torch.autograd.grad(..., retain_graph=True,
create_graph=True)` (the next row needs the same graph, and the penalty must be
differentiable), the squared rows add up to the Frobenius norm, and the reconstruction loss
plus the weighted penalty goes back once before the optimizer steps. Every earlier call keeps
the graph, no step runs in between and a fresh batch is encoded each step: nothing to report.
(contractive_ae_input_grad.py is the version that reads x.grad instead.)
"""

# expect-clean
# expect-cause: none
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(20, 32), nn.Softplus(), nn.Linear(32, 6), nn.Sigmoid())
decoder = nn.Sequential(nn.Linear(6, 32), nn.Softplus(), nn.Linear(32, 20))
opt = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=1e-3)
lam = 1e-2
for step in range(3):
    x = torch.randn(16, 20).requires_grad_()
    code = encoder(x)
    frobenius = 0.0
    for j in range(code.size(1)):
        (row,) = torch.autograd.grad(code[:, j].sum(), x, retain_graph=True, create_graph=True)
        frobenius = frobenius + row.pow(2).sum(dim=1).mean()
    recon = nn.functional.mse_loss(decoder(code), x.detach())
    loss = recon + lam * frobenius
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}: recon {recon.item():.5f} jacobian {frobenius.item():.5f}")
