import torch

w = torch.tensor(0.5, requires_grad=True)
h = torch.tensor(1.0)
for step in range(1, 5):
    print("step", step)
    h = h * w
    loss = (h - 0.1) ** 2
    loss.backward()
