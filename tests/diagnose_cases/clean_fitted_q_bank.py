"""Clean: fitted-Q targets made once per batch under no_grad and reused, a dict bank of detached rows, best loss as a float."""

# expect-clean
# expect-cause: none
import torch
from torch import nn

torch.manual_seed(0)
q_net = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(q_net.parameters(), lr=1e-3)
bank, best_loss, h0 = {}, float("inf"), None
for rnd in range(2):
    obs, next_obs = torch.randn(8, 4), torch.randn(8, 4)
    actions, rewards = torch.randint(0, 2, (8,)), torch.randn(8)
    with torch.no_grad():
        target = rewards + 0.99 * q_net(next_obs).max(1).values
    for inner in range(3):
        q_all = q_net(obs)
        q = q_all.gather(1, actions[:, None]).squeeze(1)
        loss = nn.functional.smooth_l1_loss(q, target)
        old = [bank[i] for i in range(8) if i in bank]
        if old:
            loss = loss + 0.1 * (q_all - torch.stack(old)).pow(2).mean()
        for i in range(8):
            bank[i] = q_all[i].detach()
        opt.zero_grad()
        loss.backward()
        opt.step()
        best_loss = min(best_loss, loss.item())
        print(f"round {rnd} inner {inner}: {loss.item():.6f} best {best_loss:.6f}")
