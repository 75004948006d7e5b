# expect-cause: same-loss-twice
import random
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

torch.manual_seed(0)
random.seed(0)
gamma, EPISODE_LEN, SAMPLE_SIZE, REPLAYS = 0.99, 20, 12, 3


class ToyPoleEnv:
    def reset(self):
        self.t, self.state = 0, torch.randn(4)
        return self.state

    def step(self, action):
        reward = 1.0 if (action == 1) == bool(self.state[0] > 0) else 0.0
        self.state = 0.9 * self.state + 0.3 * torch.randn(4)
        self.t += 1
        return self.state, reward, self.t >= EPISODE_LEN


class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 128)
        self.affine2 = nn.Linear(128, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        return F.softmax(self.affine2(x), dim=-1)


policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
env = ToyPoleEnv()


def select_action(state):
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))  # expect: forward
    return action.item()


def finish_episode():
    R, returns = 0, []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    idx = random.sample(range(len(returns)), SAMPLE_SIZE)
    policy_loss = [-policy.saved_log_probs[i] * returns[i] for i in idx]
    optimizer.zero_grad()
    torch.autograd.backward(policy_loss, [torch.ones_like(l) for l in policy_loss])  # expect: raises frees
    optimizer.step()


for i_episode in range(1, 6):
    state, ep_reward, done = env.reset(), 0.0, False
    while not done:
        action = select_action(state)
        state, reward, done = env.step(action)
        policy.rewards.append(reward)
        ep_reward += reward
    for _ in range(REPLAYS):
        finish_episode()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    print(f"Episode {i_episode}\tReward: {ep_reward:.1f}")
