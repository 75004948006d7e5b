"""A video model that caches its last output on `self.prev` for a temporal-consistency loss.

Rebuilt from the structure of forum reports of streaming / video models: the module keeps the
previous clip's prediction in an attribute (`self.prev = y`) and adds a smoothness penalty
between consecutive predictions. The attribute carries the previous clip's graph into the
next step. The fix: store the detached prediction (`self.prev = y.detach()`).
"""

# expect-cause: carried-state
# expect-fix: self.prev
# expect-fix: detach
import torch
from torch import nn

torch.manual_seed(0)


class Smoothed(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 6))
        self.prev = None
        self.smoothness = torch.zeros(())

    def forward(self, clip):
        y = self.net(clip)  # expect: forward
        if self.prev is not None:
            self.smoothness = (y - self.prev).pow(2).mean()
        self.prev = y
        return y


model = Smoothed()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    clip, target = torch.randn(5, 20), torch.randn(5, 6)
    loss = nn.functional.mse_loss(model(clip), target) + 0.5 * model.smoothness
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"step {step}: {loss.item():.6f}")
