"""A contrastive learner with a memory bank of keys that is appended to and never detached.

Rebuilt from the structure of issue-tracker questions about MoCo-style queues: a momentum
key encoder (not in the optimizer, updated by an exponential moving average) encodes the
second view, the keys are appended to `self.bank` (a plain list, trimmed to a size but never
cleared), and the negatives for the next steps are read from the bank. The keys of step 1
still hold the key encoder's graph in step 2. The fix: store `k.detach()` in the bank (or
encode the keys under torch.no_grad()).
"""

# expect-cause: carried-state
# expect-fix: detach
# expect-fix: .bank
import copy

import torch
from torch import nn

torch.manual_seed(0)


class MoCo(nn.Module):
    def __init__(self, size=32, bank_size=64, momentum=0.99):
        super().__init__()
        self.query_encoder = nn.Sequential(nn.Linear(size, 64), nn.ReLU(), nn.Linear(64, 16))
        self.key_encoder = copy.deepcopy(self.query_encoder)
        self.momentum = momentum
        self.bank_size = bank_size
        self.bank = []

    @torch.no_grad()
    def update_key_encoder(self):
        for q, k in zip(
            self.query_encoder.parameters(), self.key_encoder.parameters(), strict=True
        ):
            k.mul_(self.momentum).add_(q, alpha=1 - self.momentum)

    def forward(self, view1, view2):
        q = nn.functional.normalize(self.query_encoder(view1), dim=1)
        k = nn.functional.normalize(self.key_encoder(view2), dim=1)  # expect: forward
        positives = (q * k).sum(dim=1, keepdim=True)
        if self.bank:
            negatives = q @ torch.cat(self.bank).t()
            logits = torch.cat([positives, negatives], dim=1)
        else:
            logits = positives
        self.bank.append(k)
        self.bank = self.bank[-(self.bank_size // len(k)) :]
        return logits / 0.07


model = MoCo()
opt = torch.optim.SGD(model.query_encoder.parameters(), lr=0.03, momentum=0.9)
for step in range(3):
    images = torch.randn(8, 32)
    logits = model(images + 0.1 * torch.randn(8, 32), images + 0.1 * torch.randn(8, 32))
    loss = nn.functional.cross_entropy(logits, torch.zeros(8, dtype=torch.long))
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    model.update_key_encoder()
    print(f"step {step}: {loss.item():.6f}")
