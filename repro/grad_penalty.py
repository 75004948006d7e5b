import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 3, requires_grad=True), torch.randn(8, 1)
for step in range(1, 4):
    print("step", step)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    (g,) = torch.autograd.grad(loss, x)
    penalty = g.pow(2).sum()
    (loss + penalty).backward()
    opt.step()
