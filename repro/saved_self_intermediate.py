import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
a = x.exp()
y = a * a
print("before backward:", y.grad_fn._saved_self)
y.sum().backward()
print("after backward:", y.grad_fn._saved_self)
