"""A GRU forecaster whose hidden state is warmed up by one training step before the loop.

Rebuilt from the structure of forum reports of stateful time-series training: the script's
`train_step(window, hidden)` runs forward, backward and the optimizer step and returns the new
hidden state; before the loop it is called once on a burn-in window so the state is not all
zeros, and its result goes into the loop as it is. The loop detaches the state after each of
its own steps, but the warm-up's state still holds the warm-up's graph, which that step's
backward freed: the loop's first backward goes back into it. The fix: detach the state the
warm-up returns (or detach `hidden` at the top of train_step, which covers both callers).
"""

# expect-cause: carried-state
# expect-fix: detach
# expect-fix: hidden
import torch
from torch import nn

torch.manual_seed(0)


class Forecaster(nn.Module):
    def __init__(self, features=3, size=16):
        super().__init__()
        self.gru = nn.GRU(features, size, batch_first=True)
        self.head = nn.Linear(size, features)

    def forward(self, window, hidden):
        output, hidden = self.gru(window, hidden)  # expect: forward
        return self.head(output), hidden


model = Forecaster()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
series = torch.randn(4, 101, 3).cumsum(dim=1) * 0.1


def train_step(window, hidden):
    inputs, targets = window[:, :-1], window[:, 1:]
    preds, hidden = model(inputs, hidden)
    loss = nn.functional.mse_loss(preds, targets)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    return loss.item(), hidden


hidden = torch.zeros(1, 4, 16)
_, hidden = train_step(series[:, :21], hidden)  # expect: caller-frees
for start in range(20, 100, 20):
    loss, hidden = train_step(series[:, start : start + 21], hidden)  # expect: caller-raises
    hidden = hidden.detach()
    print(f"window at {start}: {loss:.6f}")
