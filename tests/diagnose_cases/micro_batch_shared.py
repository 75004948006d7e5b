"""Gradient accumulation that encodes the whole batch once, then backprops each micro-batch."""

# expect-cause: shared-forward
# expect-fix: once
# expect-not-fix: does not train
# expect-not-fix: feats.detach()
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(24, 48), nn.GELU(), nn.Linear(48, 16))
head = nn.Linear(16, 3)
params = list(encoder.parameters()) + list(head.parameters())
opt = torch.optim.AdamW(params, lr=1e-3)
accum = 4
for step in range(3):
    x, y = torch.randn(32, 24), torch.randint(0, 3, (32,))
    feats = encoder(x)  # expect: forward
    opt.zero_grad()
    for chunk, target in zip(feats.chunk(accum), y.chunk(accum), strict=True):
        loss = nn.functional.cross_entropy(head(chunk), target) / accum
        loss.backward()  # expect: raises frees
    opt.step()
    print(f"step {step}: {loss.item():.4f}")
