"""Clean: a sensor classifier that skips a malformed batch (caught shape error) and trains on.

Rebuilt from the structure of forum reports of training loops that wrap one step in `try/except
RuntimeError` and skip the batch when its shape is wrong (the message is checked, so other
errors still raise). One batch is cut to the wrong length, and nn.LayerNorm inside the
front-end nn.Sequential raises after the nn.Conv1d before it ran; the step is skipped with
`opt.zero_grad()` and the loop goes on. Every other step builds its own graph, goes back
through it once and steps: nothing to report.
"""

# expect-clean
# expect-cause: none
import torch
from torch import nn

torch.manual_seed(0)


class SensorNet(nn.Module):
    def __init__(self, channels=4, length=20, width=16, classes=3):
        super().__init__()
        self.front = nn.Sequential(
            nn.Conv1d(channels, width, 3, padding=1), nn.LayerNorm([width, length]), nn.GELU()
        )
        self.attn = nn.MultiheadAttention(width, 2, dropout=0.1, batch_first=True)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        h = self.front(x).transpose(1, 2)
        h, _ = self.attn(h, h, h, need_weights=False)
        return self.head(h.mean(dim=1))


model = SensorNet()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
for step in range(5):
    x, y = torch.randn(6, 4, 24 if step == 2 else 20), torch.randint(0, 3, (6,))
    try:
        loss = nn.functional.cross_entropy(model(x), y)
    except RuntimeError as exc:
        if "normalized_shape" not in str(exc):
            raise
        opt.zero_grad()
        print(f"step {step}: skipped a batch of shape {tuple(x.shape)}")
        continue
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}: {loss.item():.6f}")
