import torch

x = torch.tensor([1.0, 2.0], requires_grad=True)
y = x.exp()
loss = y.sum()
print("before backward:", y.grad_fn._saved_result)
loss.backward()
print("after backward:", y.grad_fn._saved_result)
