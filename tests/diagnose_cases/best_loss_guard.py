"""A "no regression" guard: the best loss so far is kept as a tensor and a penalty added whenever a batch is worse."""

# expect-cause: carried-state
# expect-fix: best_loss
# expect-not-fix: add `loss.item()` to it
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
best_loss = None
for step in range(6):
    x, y = torch.randn(10, 5), torch.randn(10, 1)
    loss = nn.functional.mse_loss(model(x), y)  # expect: forward
    total = loss
    if best_loss is not None and loss > best_loss:
        total = loss + torch.relu(loss - best_loss)
    opt.zero_grad()
    total.backward()  # expect: raises frees
    opt.step()
    if best_loss is None or loss < best_loss:
        best_loss = loss
    print(f"step {step}: {loss.item():.5f}")
