import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
y = x * x
print("before backward:", y.grad_fn._saved_self)
y.sum().backward()
print("after backward:", y.grad_fn._saved_self)
