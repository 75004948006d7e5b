import torch
from support import graph_depth

w = torch.tensor(0.5, requires_grad=True)
h = torch.tensor(1.0)
for step in range(1, 5):
    h = h * w
    loss = (h - 0.1) ** 2
    print("graph depth at step", step, "is", graph_depth(loss))
    loss.backward()
    h = h.detach()
