# expect-cause: none
import random
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)


class EnergyNet(nn.Module):
    def __init__(self, dim=2, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


class ReplayBuffer:
    def __init__(self, size=256, dim=2, reinit_freq=0.05):
        self.buffer = torch.rand(size, dim) * 4 - 2
        self.reinit_freq = reinit_freq

    def sample(self, n):
        self.idx = torch.randint(0, len(self.buffer), (n,))
        x = self.buffer[self.idx]
        fresh = torch.rand(n, 1) < self.reinit_freq
        return torch.where(fresh, torch.rand_like(x) * 4 - 2, x)

    def push(self, x):
        self.buffer[self.idx] = x.detach()


def sgld_sample(model, x_k, n_steps=10, step_size=0.1, noise=0.01):
    x_k = x_k.clone().requires_grad_(True)
    for _ in range(n_steps):
        energy = model(x_k).sum()
        grad_x = torch.autograd.grad(energy, [x_k])[0]
        x_k = (x_k - step_size * grad_x + noise * torch.randn_like(x_k)).detach().requires_grad_(True)
    return x_k.detach()


def data_batch(n=64):
    centers = torch.tensor([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])
    return centers[torch.randint(0, 3, (n,))] + 0.1 * torch.randn(n, 2)


model = EnergyNet()
buffer = ReplayBuffer()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.0, 0.999))
for it in range(20):
    x_pos = data_batch()
    x_neg = sgld_sample(model, buffer.sample(64))
    buffer.push(x_neg)
    e_pos, e_neg = model(x_pos), model(x_neg)
    loss = e_pos.mean() - e_neg.mean() + 0.1 * (e_pos.pow(2).mean() + e_neg.pow(2).mean())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if it % 5 == 0:
        print(f"iter {it} cd loss {loss.item():.4f}")
