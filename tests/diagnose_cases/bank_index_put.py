"""Instance discrimination with a memory bank tensor whose rows are overwritten, undetached, by index.

Rebuilt from the structure of research code and forum reports of memory-bank contrastive
learning (NPID-style): the module keeps `self.bank = torch.zeros(N, D)`, a plain attribute,
draws negatives for each batch from random rows of it, and after scoring writes the batch's
normalised embeddings into their rows with `self.bank[idx] = feats` (an index_put_ that makes
the bank a non-leaf holding this step's graph). The first step's backward frees the encoder
graph behind those rows; the second step's negatives are read from the bank, so its backward
goes through the write into the first step's normalize, and fails there. The fix: write
detached features into the bank, `self.bank[idx] = feats.detach()` (or under torch.no_grad()).
retain_graph=True would not do: after opt.step() the old graph's saved weights are stale.
"""

# expect-cause: carried-state
# expect-fix: detach
# expect-fix: bank
# expect-fix: self.bank[idx] = feats.detach()
# expect-not-fix: clear
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class MemoryBankModel(nn.Module):
    def __init__(self, size=32, dim=16, entries=64, negatives=24, temperature=0.1):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(size, 64), nn.ReLU(), nn.Linear(64, dim))
        self.bank = torch.zeros(entries, dim)
        self.negatives = negatives
        self.temperature = temperature

    def forward(self, images, idx):
        feats = nn.functional.normalize(self.encoder(images), dim=1)  # expect: forward
        old = nn.functional.normalize(self.bank[idx], dim=1, eps=1e-6)
        neg = self.bank[torch.randint(0, len(self.bank), (self.negatives,))]
        positives = (feats * old).sum(dim=1, keepdim=True)
        logits = torch.cat([positives, feats @ neg.t()], dim=1) / self.temperature
        self.bank[idx] = feats
        return logits


data = torch.randn(64, 32)
model = MemoryBankModel()
opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9)
for step in range(4):
    idx = torch.randperm(64)[:16]
    images = data[idx] + 0.1 * torch.randn(16, 32)
    logits = model(images, idx)
    loss = nn.functional.cross_entropy(logits, torch.zeros(16, dtype=torch.long))
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"step {step}: {loss.item():.6f}")
