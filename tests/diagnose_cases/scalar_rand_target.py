"""A target built once as `1 + 3 * torch.rand(..., requires_grad=True)`, used by two steps.

Rebuilt from the structure of beginner forum reports that write a regression's training
steps out one after the other (no loop) and build the noisy target with requires_grad=True.
What the first backward freed in the target's graph is only the Python scalar 3 that `3 *`
saved (torch wraps it in a tensor without calling saved-tensor hooks). The fix: build the
target as data, without requires_grad (or under torch.no_grad()).
"""

# expect-cause: carried-state
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(1, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.linspace(0, 1, 20).unsqueeze(1)
t = 1 + 3 * torch.rand(20, 1, requires_grad=True)  # expect: forward

# step 1
pred = model(x)
loss = ((pred - t) ** 2).mean()
opt.zero_grad()
loss.backward()  # expect: frees
opt.step()
print(f"step 1: {loss.item():.6f}")

# step 2
pred = model(x)
loss = ((pred - t) ** 2).mean()
opt.zero_grad()
loss.backward()  # expect: raises
opt.step()
print(f"step 2: {loss.item():.6f}")
