import torch

# A toy: what two nodes saved, read through their _saved_* attributes.
x = torch.tensor([1.0, 2.0], requires_grad=True)
b = torch.tensor([3.0, 4.0])
y = x.exp()
z = x * b
print("exp saved its output:", y.grad_fn._saved_result)
print("mul saved b:", z.grad_fn._saved_other)
print("mul saved x:", z.grad_fn._saved_self)
(y.sum() + z.sum()).backward()
print("y, held by this script:", y)
print("y as exp saved it:", y.grad_fn._saved_result)
