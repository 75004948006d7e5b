import torch
from torch import nn

torch.manual_seed(0)
G = nn.Linear(2, 2)
D = nn.Sequential(nn.Linear(2, 1), nn.Sigmoid())
bce = nn.BCELoss()
z = torch.randn(4, 2)
real = torch.randn(4, 2)
fake = G(z)

d_loss = bce(D(real), torch.ones(4, 1)) + bce(D(fake.detach()), torch.zeros(4, 1))
d_loss.backward()
print("G.weight.grad after the discriminator step:", G.weight.grad)

g_loss = bce(D(fake), torch.ones(4, 1))
g_loss.backward()
print("G.weight.grad after the generator step:", G.weight.grad)
