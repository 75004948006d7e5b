"""An A2C agent with an nn.LSTMCell policy whose (hx, cx) carries over between n-step rollouts.

Rebuilt from the structure of forum and issue reports on A3C/A2C ports (pytorch-a3c style):
the agent unrolls an LSTMCell for `num_steps` environment steps, computes the policy and value
losses, steps the optimizer, and continues the same episode in the next rollout. The original
detaches the state at the start of each rollout (`cx = cx.detach(); hx = hx.detach()`); the
reader's port only resets it to zeros when an episode ends. The second rollout's backward runs
into the first rollout's LSTMCell graph, which the first backward freed. The fix: detach both
`hx` and `cx` at the start of every rollout (or after each update): detaching `cx` alone still
raises, through `hx` (checked by running it).
"""

# expect-cause: carried-state
# expect-fix: detach
# expect-fix: cx
# expect-fix: hx
import torch
from torch import nn

torch.manual_seed(0)


class ToyEnv:
    def __init__(self, obs=6, length=40):
        self.obs, self.length, self.t = obs, length, 0

    def reset(self):
        self.t = 0
        return torch.randn(self.obs)

    def step(self, action):
        self.t += 1
        return torch.randn(self.obs), float(action == self.t % 3), self.t >= self.length


class ActorCritic(nn.Module):
    def __init__(self, obs=6, hidden=32, actions=3):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(obs, hidden), nn.ELU())
        self.lstm = nn.LSTMCell(hidden, hidden)
        self.actor, self.critic = nn.Linear(hidden, actions), nn.Linear(hidden, 1)

    def forward(self, obs, state):
        hx, cx = self.lstm(self.embed(obs[None]), state)  # expect: forward
        return self.actor(hx), self.critic(hx), (hx, cx)


env, model = ToyEnv(), ActorCritic()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
obs, hx, cx = env.reset(), torch.zeros(1, 32), torch.zeros(1, 32)
for update in range(4):
    log_probs, values, rewards, entropies = [], [], [], []
    for _ in range(8):
        logits, value, (hx, cx) = model(obs, (hx, cx))
        dist = torch.distributions.Categorical(logits=logits)
        action = dist.sample()
        obs, reward, done = env.step(action.item())
        log_probs.append(dist.log_prob(action))
        values.append(value)
        rewards.append(reward)
        entropies.append(dist.entropy())
        if done:
            obs, hx, cx = env.reset(), torch.zeros(1, 32), torch.zeros(1, 32)
            break
    R, policy_loss, value_loss = torch.zeros(1, 1), 0, 0
    for i in reversed(range(len(rewards))):
        R = 0.99 * R + rewards[i]
        advantage = R - values[i]
        value_loss = value_loss + 0.5 * advantage.pow(2)
        policy_loss = policy_loss - log_probs[i] * advantage.detach() - 0.01 * entropies[i]
    opt.zero_grad()
    (policy_loss + 0.5 * value_loss).sum().backward()  # expect: raises frees
    nn.utils.clip_grad_norm_(model.parameters(), 40)
    opt.step()
    print(f"update {update}: {policy_loss.item():.4f} {value_loss.item():.4f}")
