import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
loss = (x**3).sum()
(g,) = torch.autograd.grad(loss, x, create_graph=True)
print("first derivative:", g)
(gg,) = torch.autograd.grad(g.sum(), x)
print("second derivative:", gg)
