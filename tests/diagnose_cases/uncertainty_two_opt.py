"""Uncertainty-weighted multi-task loss: backward(retain_graph=True), clip, model step, then backward again for the weights' optimizer."""

# expect-cause: inplace-after-retain
# expect-fix: once
# expect-not-fix: retain_graph=True
import torch
from torch import nn

torch.manual_seed(0)
mse = nn.functional.mse_loss
trunk = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
heads = nn.ModuleList([nn.Linear(32, 1), nn.Linear(32, 1)])
log_vars = nn.Parameter(torch.zeros(2))
opt_model = torch.optim.SGD([*trunk.parameters(), *heads.parameters()], lr=0.05)
opt_weights = torch.optim.SGD([log_vars], lr=0.01)
for step in range(3):
    x, ys = torch.randn(8, 8), [torch.randn(8, 1), torch.randn(8, 1)]
    feats = trunk(x)
    task_losses = [mse(h(feats), y) for h, y in zip(heads, ys, strict=True)]  # expect: forward
    loss = sum(torch.exp(-s) * t + s for s, t in zip(log_vars, task_losses, strict=True))
    opt_model.zero_grad()
    loss.backward(retain_graph=True)  # expect: kept
    nn.utils.clip_grad_norm_(trunk.parameters(), 1.0)
    opt_model.step()  # expect: changed
    opt_weights.zero_grad()
    loss.backward()  # expect: raises
    opt_weights.step()
    print(f"step {step}: {loss.item():.5f}")
