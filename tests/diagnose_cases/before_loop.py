"""Class prototypes normalised once before the loop from a trained parameter, used every step."""

# expect-cause: carried-state
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Linear(12, 8)
prototypes = nn.Parameter(torch.randn(5, 8))
opt = torch.optim.SGD(list(encoder.parameters()) + [prototypes], lr=0.1)
unit = nn.functional.normalize(prototypes, dim=1)  # expect: forward
for _step in range(4):
    x, labels = torch.randn(16, 12), torch.randint(0, 5, (16,))
    logits = nn.functional.normalize(encoder(x), dim=1) @ unit.t()
    loss = nn.functional.cross_entropy(logits / 0.1, labels)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
