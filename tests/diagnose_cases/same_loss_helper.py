"""A logging helper calls backward to read the gradient norm; the loop calls it again."""

# expect-cause: same-loss-twice
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def grad_norm(loss):
    loss.backward()  # expect: frees
    return torch.norm(torch.stack([p.grad.norm() for p in model.parameters()]))


for _step in range(3):
    x, y = torch.randn(8, 5), torch.randn(8, 1)
    loss = nn.functional.mse_loss(model(x), y)  # expect: forward
    opt.zero_grad()
    print(f"grad norm {grad_norm(loss).item():.6f}")
    loss.backward()  # expect: raises
    opt.step()
