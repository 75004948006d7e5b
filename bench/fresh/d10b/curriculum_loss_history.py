# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class IndexedDataset(TensorDataset):
    def __getitem__(self, idx):
        return (*super().__getitem__(idx), idx)


class LossHistoryCurriculum:
    """Self-paced curriculum on dynamic instance hardness (EMA of each sample's loss)."""

    def __init__(self, n_samples, lam=1.0, growth=1.3, gamma=0.7):
        self.history = {}
        self.n = n_samples
        self.lam, self.growth, self.gamma = lam, growth, gamma

    def weights(self, idx):
        prev = [self.history.get(int(i), None) for i in idx]
        if any(p is None for p in prev):
            return torch.ones(len(idx))
        prev = torch.stack(prev)
        return (prev < self.lam).float() + (prev >= self.lam).float() * torch.exp(self.lam - prev)

    def update(self, idx, per_sample_loss):
        for i, l in zip(idx, per_sample_loss):
            old = self.history.get(int(i))
            self.history[int(i)] = l if old is None else self.gamma * l + (1 - self.gamma) * old

    def step_epoch(self):
        self.lam *= self.growth


torch.manual_seed(0)
X, Y = torch.randn(64, 10), torch.randint(0, 3, (64,))
loader = DataLoader(IndexedDataset(X, Y), batch_size=16, shuffle=False)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
curriculum = LossHistoryCurriculum(len(X))

for epoch in range(3):
    for xb, yb, idx in loader:
        per_sample = F.cross_entropy(model(xb), yb, reduction="none")  # expect: forward
        w = curriculum.weights(idx)
        loss = (w * per_sample).sum() / w.sum()
        optimizer.zero_grad()
        loss.backward()  # expect: raises frees
        optimizer.step()
        curriculum.update(idx, per_sample)
    curriculum.step_epoch()
    print(f"epoch {epoch} loss {loss.item():.4f} lam {curriculum.lam:.2f}")
