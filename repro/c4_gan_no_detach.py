import torch
from torch import nn

torch.manual_seed(0)
G = nn.Linear(2, 2)
D = nn.Sequential(nn.Linear(2, 1), nn.Sigmoid())
opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
bce = nn.BCELoss()
real, ones, zeros = torch.randn(4, 2), torch.ones(4, 1), torch.zeros(4, 1)
for step in range(1, 4):
    print("step", step)
    fake = G(torch.randn(4, 2))
    opt_d.zero_grad()
    opt_g.zero_grad()
    d_loss = bce(D(real), ones) + bce(D(fake), zeros)
    d_loss.backward()
    opt_d.step()
    g_loss = bce(D(fake), ones)
    g_loss.backward()
    opt_g.step()
