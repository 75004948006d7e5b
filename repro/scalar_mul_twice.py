import torch

# A toy: w * 2.0 saves the scalar 2.0 for its backward, so a second call finds it freed.
w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
loss = (w * 2.0).sum()
loss.backward()
print("w.grad after the first call:", w.grad)
loss.backward()
