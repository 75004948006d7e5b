import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
loss = (x**3).sum()
(g,) = torch.autograd.grad(loss, x)
loss.backward()
