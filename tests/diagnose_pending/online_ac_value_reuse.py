"""A one-step actor-critic that reuses the next state's value as the next step's value.

Rebuilt from the structure of forum reports of online (one-step) actor-critic agents written
from Sutton & Barto's pseudocode: every environment step computes `next_value =
critic(next_state)`, the TD error `reward + gamma * next_value - value`, and updates actor and
critic at once; to save a forward pass, the loop then carries `value = next_value` into the
next step. The first update's backward goes through `next_value` (the TD target is not
detached either) and frees the critic's forward on the next state; the second update's TD
error starts from that same tensor and fails there. The fix: compute `value =
critic(state)` afresh at the start of every step, and make the TD target a constant,
`reward + gamma * next_value.detach()` (semi-gradient TD). Detaching the carried value instead
(`value = next_value.detach()`) would run, but the critic would learn only through the next
state's value, the wrong end of the TD error; detaching only the target leaves the carried
`value` holding weights that `opt.step()` changed in place, and its backward raises the
in-place error (both checked by running them).
"""

# expect-cause: carried-state
# expect-fix: next_value
# expect-not-fix: `value = value.detach()`
# expect-not-fix: retain_graph
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
critic = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=1e-3)
gamma = 0.99


def env_step(state, action):
    next_state = 0.9 * state + 0.1 * torch.randn(4) + (0.2 if action == 1 else -0.2)
    return next_state, float(next_state[0] > 0)


state = torch.randn(4)
value = critic(state)
for t in range(5):
    dist = Categorical(logits=actor(state))
    action = dist.sample()
    next_state, reward = env_step(state, action.item())
    next_value = critic(next_state)  # expect: forward
    td_error = reward + gamma * next_value - value
    actor_loss = -dist.log_prob(action) * td_error.detach()
    critic_loss = td_error.pow(2)
    opt.zero_grad()
    (actor_loss + critic_loss).sum().backward()  # expect: raises frees
    opt.step()
    state, value = next_state, next_value
    print(f"t {t}: td {td_error.item():.5f}")
