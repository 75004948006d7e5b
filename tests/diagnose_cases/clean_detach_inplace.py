"""Clean: a GRU carrying its state across windows with hidden.detach_() (in place), EMA copy under no_grad."""

# expect-clean
# expect-cause: none
import copy

import torch
from torch import nn

torch.manual_seed(0)
gru = nn.GRU(3, 16, batch_first=True)
fc = nn.Linear(16, 3)
ema_fc = copy.deepcopy(fc)
opt = torch.optim.Adam([*gru.parameters(), *fc.parameters()], lr=1e-2)
series = torch.randn(2, 80, 3).cumsum(1) * 0.1
hidden = torch.zeros(1, 2, 16)
for start in range(0, 60, 10):
    hidden.detach_()
    out, hidden = gru(series[:, start : start + 10], hidden)
    loss = nn.functional.mse_loss(fc(out[:, -1]), series[:, start + 10])
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for pe, p in zip(ema_fc.parameters(), fc.parameters(), strict=True):
            pe.lerp_(p, 0.1)
    print(f"window {start}: {loss.item():.6f} ema {ema_fc(out[:, -1]).mean().item():.6f}")
