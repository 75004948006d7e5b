"""Logging an activation's saved tensor from its grad_fn after the backward freed it."""

# expect-cause: saved-read
import torch
from torch import nn

torch.manual_seed(0)
layer = nn.Linear(4, 4)
opt = torch.optim.SGD(layer.parameters(), lr=0.1)
x = torch.randn(8, 4)
hidden = torch.sigmoid(layer(x))  # expect: forward
loss = hidden.pow(2).mean()
opt.zero_grad()
loss.backward()  # expect: frees
opt.step()
saved = hidden.grad_fn._saved_result  # expect: raises
print(saved.mean())
