"""A linear probe on features a pretrained encoder computed once, before the loop, with grad on.

Rebuilt from the structure of forum reports of linear-probe / transfer-learning scripts: the
pretrained backbone is left out of the optimizer (so it is not trained) but its parameters
still require grad, and the features of the whole (small) dataset are computed once before
the epochs without torch.no_grad(). The fix: compute the features under torch.no_grad().
"""

# expect-cause: carried-state
# expect-where: before the loop
# expect-fix: no_grad
import torch
from torch import nn

torch.manual_seed(0)


def load_pretrained():
    backbone = nn.Sequential(nn.Linear(24, 48), nn.GELU(), nn.Linear(48, 16), nn.LayerNorm(16))
    backbone.eval()
    return backbone


def extract_features(backbone, images):
    return backbone(images)  # expect: forward


backbone = load_pretrained()
probe = nn.Linear(16, 5)
opt = torch.optim.SGD(probe.parameters(), lr=0.1, momentum=0.9)
images, labels = torch.randn(32, 24), torch.randint(0, 5, (32,))
features = extract_features(backbone, images)
for epoch in range(3):
    loss = nn.functional.cross_entropy(probe(features), labels)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"epoch {epoch}: {loss.item():.6f}")
