"""Fitted Q-iteration: TD targets computed once per replay batch from the online net (no no_grad), then several gradient steps."""

# expect-cause: carried-state
# expect-fix: target
# expect-fix: no_grad
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)
q_net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(q_net.parameters(), lr=1e-3)
gamma = 0.99
for _round in range(2):
    obs, next_obs = torch.randn(16, 4), torch.randn(16, 4)
    actions, rewards, done = torch.randint(0, 2, (16,)), torch.randn(16), torch.zeros(16)
    target = rewards + gamma * (1 - done) * q_net(next_obs).max(1).values  # expect: forward
    for inner in range(3):
        q = q_net(obs).gather(1, actions[:, None]).squeeze(1)
        loss = nn.functional.smooth_l1_loss(q, target)
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        opt.step()
        print(f"inner {inner}: {loss.item():.5f}")
