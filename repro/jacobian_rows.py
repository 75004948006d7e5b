import torch

# A toy: the Jacobian one row at a time; each call but the last keeps the graph.
x = torch.tensor([1.0, 2.0], requires_grad=True)
y = torch.stack([x[0] * x[1], x[0] ** 2])
(row0,) = torch.autograd.grad(y[0], x, retain_graph=True)
(row1,) = torch.autograd.grad(y[1], x)
print("row 0:", row0)
print("row 1:", row1)
