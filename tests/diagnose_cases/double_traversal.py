"""A weight penalty built once before the loop from sums alone: no error, gradients added again."""

# expect-cause: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
penalty = sum(p.sum() for p in model.parameters())
for _step in range(3):
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    loss = nn.functional.mse_loss(model(x), y) + penalty / 1000
    opt.zero_grad()
    loss.backward()  # expect: first second
    opt.step()
    print(f"{loss.item():.6f}")
