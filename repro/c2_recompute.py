import torch

w = torch.tensor(0.5, requires_grad=True)
for step in range(1, 5):
    h = torch.tensor(1.0)
    for _ in range(step):
        h = h * w
    loss = (h - 0.1) ** 2
    loss.backward()
print("w.grad:", w.grad)
