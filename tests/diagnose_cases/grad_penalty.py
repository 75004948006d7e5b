"""An R1 gradient penalty taken with torch.autograd.grad without create_graph=True."""

# expect-cause: shared-forward
# expect-fix: create_graph=True
# expect-checker: shared-forward/grad
import torch
from torch import nn

torch.manual_seed(0)
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt = torch.optim.Adam(D.parameters(), lr=1e-4)
for _step in range(3):
    real = torch.randn(16, 2).requires_grad_(True)
    scores = D(real)  # expect: forward
    (grads,) = torch.autograd.grad(scores.sum(), real)  # expect: frees
    penalty = grads.pow(2).sum(dim=1).mean()
    loss = nn.functional.softplus(-scores).mean() + 5.0 * penalty
    opt.zero_grad()
    loss.backward()  # expect: raises
    opt.step()
