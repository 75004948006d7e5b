"""A critic whose value outputs are kept in a replay list and trained on again later."""

# expect-cause: carried-state
import torch
from torch import nn

torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
replay = []
for _step in range(5):
    state, reward = torch.randn(1, 4), torch.randn(1, 1)
    value = critic(state)  # expect: forward
    replay.append((value, reward))
    batch = replay[-3:]
    loss = sum((v - r).pow(2).mean() for v, r in batch) / len(batch)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
