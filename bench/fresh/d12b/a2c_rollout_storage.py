# expect-cause: carried-state
from dataclasses import dataclass
import torch
import torch.nn as nn
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self, obs_dim, num_actions, hidden_size=64):
        super().__init__()
        self.base = nn.Sequential(nn.Linear(obs_dim, hidden_size), nn.Tanh())
        self.critic_linear = nn.Linear(hidden_size, 1)
        self.dist = nn.Linear(hidden_size, num_actions)

    def act(self, inputs):
        features = self.base(inputs)
        value = self.critic_linear(features)
        dist = Categorical(logits=self.dist(features))
        action = dist.sample()
        return value, action.unsqueeze(-1), dist.log_prob(action).unsqueeze(-1)

    def get_value(self, inputs):
        return self.critic_linear(self.base(inputs))
    def evaluate_actions(self, inputs, action):
        features = self.base(inputs)
        dist = Categorical(logits=self.dist(features))
        return self.critic_linear(features), dist.log_prob(action.squeeze(-1)).unsqueeze(-1), dist.entropy().mean()


@dataclass
class RolloutStorage:
    num_steps: int
    num_processes: int
    obs_dim: int

    def __post_init__(self):
        self.obs = torch.zeros(self.num_steps + 1, self.num_processes, self.obs_dim)
        self.rewards = torch.zeros(self.num_steps, self.num_processes, 1)
        self.value_preds = torch.zeros(self.num_steps + 1, self.num_processes, 1)
        self.returns = torch.zeros(self.num_steps + 1, self.num_processes, 1)
        self.action_log_probs = torch.zeros(self.num_steps, self.num_processes, 1)
        self.actions = torch.zeros(self.num_steps, self.num_processes, 1, dtype=torch.long)
        self.masks = torch.ones(self.num_steps + 1, self.num_processes, 1)
        self.step = 0
    def insert(self, obs, actions, action_log_probs, value_preds, rewards, masks):
        self.obs[self.step + 1].copy_(obs)
        self.actions[self.step].copy_(actions)
        self.action_log_probs[self.step].copy_(action_log_probs)
        self.value_preds[self.step].copy_(value_preds)  # expect: forward
        self.rewards[self.step].copy_(rewards)
        self.masks[self.step + 1].copy_(masks)
        self.step = (self.step + 1) % self.num_steps

    def after_update(self):
        self.obs[0].copy_(self.obs[-1])
        self.masks[0].copy_(self.masks[-1])

    def compute_returns(self, next_value, gamma):
        self.returns[-1] = next_value
        for step in reversed(range(self.rewards.size(0))):
            self.returns[step] = self.returns[step + 1] * gamma * self.masks[step + 1] + self.rewards[step]


torch.manual_seed(0)
num_steps, num_processes, obs_dim, num_actions = 5, 8, 4, 3
actor_critic = Policy(obs_dim, num_actions)
optimizer = torch.optim.RMSprop(actor_critic.parameters(), lr=7e-4, eps=1e-5, alpha=0.99)
rollouts = RolloutStorage(num_steps, num_processes, obs_dim)
obs = torch.randn(num_processes, obs_dim)
rollouts.obs[0].copy_(obs)
for j in range(4):
    for step in range(num_steps):
        value, action, action_log_prob = actor_critic.act(obs)
        obs = torch.randn(num_processes, obs_dim)
        reward = (action == 1).float() + 0.1 * torch.randn(num_processes, 1)
        masks = (torch.rand(num_processes, 1) > 0.05).float()
        rollouts.insert(obs, action, action_log_prob, value, reward, masks)
    with torch.no_grad():
        next_value = actor_critic.get_value(rollouts.obs[-1])
    rollouts.compute_returns(next_value, gamma=0.99)
    values, action_log_probs = rollouts.value_preds[:-1], rollouts.action_log_probs
    advantages = rollouts.returns[:-1] - values
    value_loss = advantages.pow(2).mean()
    action_loss = -(advantages.detach() * action_log_probs).mean()
    optimizer.zero_grad()
    torch.autograd.backward([value_loss * 0.5, action_loss])  # expect: raises frees
    nn.utils.clip_grad_norm_(actor_critic.parameters(), 0.5)
    optimizer.step()
    rollouts.after_update()
    print(j, value_loss.item(), action_loss.item())
