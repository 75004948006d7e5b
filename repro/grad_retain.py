import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
loss = (x**3).sum()
(g1,) = torch.autograd.grad(loss, x, retain_graph=True)
(g2,) = torch.autograd.grad(loss, x)
print("first:", g1)
print("second:", g2)
