"""Advantage actor-critic with a shared trunk, two optimizers, and an advantage that is not detached.

Rebuilt from the structure of forum and issue-tracker reports of A2C training loops: one trunk
feeds a policy head and a value head; the actor optimizer holds the trunk and the policy head,
the critic optimizer the value head. The advantage `returns - value` is taken from the
critic's output as it is, and the loop runs `critic_loss.backward(); critic_opt.step()` and
then `actor_loss.backward(); actor_opt.step()`. The critic's backward frees the value head's
and the trunk's graph; the actor loss reaches the value head through the advantage (and the
trunk through the policy), so its backward fails on the value head's node. Both losses go
back through one forward. The fix must detach the advantage in the actor loss (the policy
gradient must not train the critic) and then backprop that forward once: zero both
optimizers, `(actor_loss + critic_loss).backward()`, step both (or keep `critic_loss.backward(
retain_graph=True)`, which with the detached advantage also runs; the actor then never reads
the stepped value head). Detaching the advantage alone still raises (the trunk is shared).
Adding the losses without the detach runs but lets the actor loss train the value head, and
retain_graph=True without it trades this error for torch's in-place one: critic_opt.step()
has changed the value head's weight that the actor's backward needs.
"""

# expect-cause: shared-forward
# expect-fix: detach
# expect-fix: advantage
import torch
from torch import nn

torch.manual_seed(0)


class ActorCritic(nn.Module):
    def __init__(self, obs=6, actions=3, hidden=32):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs, hidden), nn.Tanh())
        self.actor = nn.Linear(hidden, actions)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, obs):
        h = self.trunk(obs)
        dist = torch.distributions.Categorical(logits=self.actor(h))
        value = self.critic(h).squeeze(-1)  # expect: forward
        return dist, value


net = ActorCritic()
actor_opt = torch.optim.Adam([*net.trunk.parameters(), *net.actor.parameters()], lr=7e-4)
critic_opt = torch.optim.Adam(net.critic.parameters(), lr=1e-3)
gamma = 0.99
for update in range(3):
    obs = torch.randn(16, 6)
    dist, value = net(obs)
    actions = dist.sample()
    rewards = (actions == obs[:, :3].argmax(dim=1)).float()
    returns = rewards + gamma * torch.randn(16).clamp(-1, 1)
    advantage = returns - value
    critic_loss = advantage.pow(2).mean()
    actor_loss = -(dist.log_prob(actions) * advantage).mean() - 0.01 * dist.entropy().mean()
    critic_opt.zero_grad()
    critic_loss.backward()  # expect: frees
    critic_opt.step()
    actor_opt.zero_grad()
    actor_loss.backward()  # expect: raises
    actor_opt.step()
    print(f"update {update}: {critic_loss.item():.6f} {actor_loss.item():.6f}")
