"""Clean: two task losses, the first backward with retain_graph=True, one optimizer step after both."""

# expect-clean
# expect-cause: none
import torch
from torch import nn

torch.manual_seed(0)
trunk = nn.Sequential(nn.Linear(12, 32), nn.ReLU())
head_a, head_b = nn.Linear(32, 3), nn.Linear(32, 1)
opt = torch.optim.SGD([*trunk.parameters(), *head_a.parameters(), *head_b.parameters()], lr=0.05)
for step in range(3):
    x, ya, yb = torch.randn(8, 12), torch.randint(0, 3, (8,)), torch.randn(8, 1)
    shared = trunk(x)
    loss_a = nn.functional.cross_entropy(head_a(shared), ya)
    loss_b = nn.functional.mse_loss(head_b(shared), yb)
    opt.zero_grad()
    loss_a.backward(retain_graph=True)
    loss_b.backward()
    opt.step()
    print(f"step {step}: {loss_a.item():.6f} {loss_b.item():.6f}")
