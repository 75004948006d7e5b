"""A GAN step with two optimizers whose discriminator loss does not detach the fake batch."""

# expect-cause: shared-forward
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2), nn.Tanh())
D = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for _step in range(3):
    real = torch.randn(8, 2)
    fake = G(torch.randn(8, 4))  # expect: forward
    opt_d.zero_grad()
    loss_d = bce(D(real), torch.ones(8, 1)) + bce(D(fake), torch.zeros(8, 1))
    loss_d.backward()  # expect: frees
    opt_d.step()
    opt_g.zero_grad()
    loss_g = bce(D(fake), torch.ones(8, 1))
    loss_g.backward()  # expect: raises
    opt_g.step()
