"""REINFORCE with a policy that keeps its action log-probabilities in a list never cleared.

Rebuilt from the structure of the reinforcement-learning example and the reports against it
(pytorch/examples' reinforce.py): `select_action` appends each `m.log_prob(action)` to
`policy.saved_log_probs`, `finish_episode` builds the loss from that list, but only the rewards
are cleared after the update, so `zip` pairs the second episode's returns with the first
episode's log-probabilities, whose graph the first update freed. Detaching them would leave
no policy gradient; the fix: clear the list after each update (`del policy.saved_log_probs[:]`).
"""

# expect-cause: carried-state
# expect-fix: saved_log_probs
# expect-fix: clear
# expect-not-fix: detach
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, state):
        return torch.softmax(self.affine(state), dim=-1)


policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)


def select_action(state):
    m = Categorical(policy(state))
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))  # expect: forward
    return action.item()


def finish_episode(gamma=0.99):
    running, returns = 0.0, []
    for reward in policy.rewards[::-1]:
        running = reward + gamma * running
        returns.insert(0, running)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-6)
    policy_loss = [-lp * r for lp, r in zip(policy.saved_log_probs, returns, strict=False)]
    optimizer.zero_grad()
    loss = torch.stack(policy_loss).sum()
    loss.backward()  # expect: raises frees
    optimizer.step()
    del policy.rewards[:]


for episode in range(3):
    state = torch.randn(4)
    for _t in range(5):
        action = select_action(state)
        state = torch.randn(4) + action
        policy.rewards.append(1.0 if action == 1 else 0.0)
    finish_episode()
    print(f"episode {episode}: {len(policy.saved_log_probs)} log-probs kept")
