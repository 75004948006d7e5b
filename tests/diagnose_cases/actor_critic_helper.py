"""An actor-critic agent whose `_update` helper runs zero_grad, backward and step for each loss.

Rebuilt from the structure of issue-tracker reports against actor-critic tutorials: one
network body feeds a policy head and a value head; the agent updates the critic with
`self._update(self.critic_opt, value_loss)` and then the actor with
`self._update(self.actor_opt, policy_loss)`. Both calls run the helper's one backward line,
and both losses go back through the body's forward. The fix: add the two losses and call
backward once (one optimizer over all parameters, or both steps after that one backward).
"""

# expect-cause: shared-forward
import torch
from torch import nn

torch.manual_seed(0)


class ActorCritic(nn.Module):
    def __init__(self, obs_size, actions):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs_size, 32), nn.Tanh())
        self.policy = nn.Linear(32, actions)
        self.value = nn.Linear(32, 1)

    def forward(self, obs):
        features = self.body(obs)  # expect: forward
        return torch.distributions.Categorical(logits=self.policy(features)), self.value(features)


class Agent:
    def __init__(self):
        self.net = ActorCritic(4, 2)
        self.actor_opt = torch.optim.Adam(
            [*self.net.body.parameters(), *self.net.policy.parameters()], lr=1e-3
        )
        self.critic_opt = torch.optim.Adam(self.net.value.parameters(), lr=1e-3)

    def _update(self, optimizer, loss):
        optimizer.zero_grad()
        loss.backward()  # expect: raises frees
        optimizer.step()

    def learn(self, obs, actions, returns):
        dist, values = self.net(obs)
        advantage = returns - values.squeeze(1)
        value_loss = advantage.pow(2).mean()
        policy_loss = -(dist.log_prob(actions) * advantage.detach()).mean()
        self._update(self.critic_opt, value_loss)  # expect: caller-frees
        self._update(self.actor_opt, policy_loss)  # expect: caller-raises
        return value_loss.item(), policy_loss.item()


agent = Agent()
for _episode in range(3):
    obs, actions, returns = torch.randn(5, 4), torch.randint(0, 2, (5,)), torch.randn(5)
    print(agent.learn(obs, actions, returns))
