"""A GRU forecaster that calls hidden.detach() as a statement, discarding the detached tensor."""

# expect-cause: carried-state
# expect-fix: hidden
# expect-fix: detach
# expect-not-fix: pred
# expect-fix: changes nothing
# expect-fix: hidden = hidden.detach()
import torch
from torch import nn

torch.manual_seed(0)


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(3, 16, batch_first=True)
        self.fc = nn.Linear(16, 3)

    def forward(self, x, h):
        out, h = self.gru(x, h)  # expect: forward
        return self.fc(out[:, -1]), h


model = Forecaster()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
series = torch.randn(2, 80, 3).cumsum(1) * 0.1
hidden = torch.zeros(1, 2, 16)
for start in range(0, 60, 10):
    window, target = series[:, start : start + 10], series[:, start + 10]
    hidden.detach()
    pred, hidden = model(window, hidden)
    loss = nn.functional.mse_loss(pred, target)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"window {start}: {loss.item():.5f}")
