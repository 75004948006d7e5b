"""Temporal consistency: each sample's embedding stored in a dict keyed by sample id, pulled toward last epoch's entry."""

# expect-cause: carried-state
# expect-fix: `bank
# expect-not-fix: `loss`
# expect-fix: detach
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 8))
classifier = nn.Linear(8, 3)
opt = torch.optim.SGD([*encoder.parameters(), *classifier.parameters()], lr=0.05)
data = torch.randn(12, 10)
labels = torch.randint(0, 3, (12,))
bank = {}
for epoch in range(2):
    for start in range(0, 12, 4):
        ids = list(range(start, start + 4))
        emb = nn.functional.normalize(encoder(data[ids]), dim=1)  # expect: forward
        loss = nn.functional.cross_entropy(classifier(emb), labels[ids])
        old = [bank[i] for i in ids if i in bank]
        if old:
            loss = loss + (1 - (emb * torch.stack(old)).sum(1)).mean()
        for row, i in enumerate(ids):
            bank[i] = emb[row]
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        opt.step()
    print(f"epoch {epoch}: {loss.item():.5f}")
