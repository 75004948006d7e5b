import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 3, requires_grad=True), torch.randn(8, 1)
for step in range(1, 4):
    opt.zero_grad()
    loss = nn.functional.mse_loss(checkpoint(model, x, use_reentrant=False), y)
    (g,) = torch.autograd.grad(loss, x, create_graph=True)
    penalty = g.pow(2).sum()
    (loss + penalty).backward()
    print("step", step, "penalty", round(penalty.item(), 4))
    opt.step()
