"""An ensemble of heads on one backbone, each head's loss backpropagated in a list comprehension."""

# expect-cause: shared-forward
# expect-fix: once
# expect-not-fix: feat.detach()
import torch
from torch import nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
heads = nn.ModuleList(nn.Linear(32, 2) for _ in range(3))
opt = torch.optim.SGD(list(backbone.parameters()) + list(heads.parameters()), lr=0.05)
crit = nn.CrossEntropyLoss()
for step in range(3):
    x, y = torch.randn(12, 10), torch.randint(0, 2, (12,))
    feat = backbone(x)  # expect: forward
    opt.zero_grad()
    [crit(head(feat), y).backward() for head in heads]  # expect: raises frees
    opt.step()
    print(f"step {step} done")
