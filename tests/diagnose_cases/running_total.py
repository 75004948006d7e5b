"""Backward on a running total of the loss instead of on this step's loss."""

# expect-cause: carried-state
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total = 0.0
for step in range(4):
    x, y = torch.randn(8, 6), torch.randn(8, 1)
    loss = nn.functional.mse_loss(model(x), y)  # expect: forward
    total = total + loss
    opt.zero_grad()
    total.backward()  # expect: raises frees
    opt.step()
    print(f"step {step}: total {total.item():.6f}")
