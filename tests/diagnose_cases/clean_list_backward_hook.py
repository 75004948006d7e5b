"""Clean: torch.autograd.backward on [loss_a, loss_b] sharing one trunk in ONE call, a gradient-scaling tensor hook, reentrant checkpoint."""

# expect-clean
# expect-cause: none
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
trunk = nn.Sequential(nn.Linear(12, 32), nn.Tanh())
head_a, head_b = nn.Linear(32, 3), nn.Linear(32, 1)
opt = torch.optim.SGD([*trunk.parameters(), *head_a.parameters(), *head_b.parameters()], lr=0.05)
loss_b = torch.zeros(())
for step in range(4):
    x, ya = torch.randn(8, 12).requires_grad_(), torch.randint(0, 3, (8,))
    yb = torch.randn(8, 1) if step % 2 == 0 else None
    feats = checkpoint(trunk, x, use_reentrant=True)
    feats.register_hook(lambda g: g * 0.5)
    loss_a = nn.functional.cross_entropy(head_a(feats), ya)
    loss_b = nn.functional.mse_loss(head_b(feats), yb) if yb is not None else torch.zeros(())
    opt.zero_grad()
    torch.autograd.backward([loss_a, loss_b] if yb is not None else [loss_a])
    nn.utils.clip_grad_norm_(trunk.parameters(), 1.0)
    opt.step()
    print(f"step {step}: {loss_a.item():.6f} {loss_b.item():.6f}")
