import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
loss = (x * x).sum()
loss.backward(retain_graph=True)
print("x.grad after the first call:", x.grad)
loss.backward()
print("x.grad after the second call:", x.grad)
