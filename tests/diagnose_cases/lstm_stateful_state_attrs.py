"""A "stateful" LSTM forecaster that keeps its state on the module and detaches only h.

Rebuilt from the structure of forum reports of Keras-style stateful LSTMs ported to PyTorch: the
model stores `self.h` and `self.c` between calls so each window continues the previous one, and
a `detach_state()` method, called after every optimizer step, was written as `self.h =
self.h.detach()` alone. The cell state `self.c` still holds the previous window's nn.LSTM graph,
which that window's backward freed, so the next backward runs into it. The fix: detach the cell
state too, `self.c = self.c.detach()`.
"""

# expect-cause: carried-state
# expect-fix: detach
# expect-fix: c.detach()
import torch
from torch import nn

torch.manual_seed(0)


class StatefulLSTM(nn.Module):
    def __init__(self, features=4, hidden=20, batch=3):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, batch_first=True)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, 1)
        self.h = torch.zeros(1, batch, hidden)
        self.c = torch.zeros(1, batch, hidden)

    def forward(self, window):
        out, (self.h, self.c) = self.lstm(window, (self.h, self.c))  # expect: forward
        return self.head(self.norm(out[:, -1]))

    def detach_state(self):
        self.h = self.h.detach()


model = StatefulLSTM()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
series = torch.randn(3, 101, 4).cumsum(dim=1) * 0.1
for start in range(0, 90, 15):
    window, target = series[:, start : start + 15], series[:, start + 15, :1]
    pred = model(window)
    loss = nn.functional.smooth_l1_loss(pred, target)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    model.detach_state()
    print(f"window {start}: {loss.item():.5f}")
