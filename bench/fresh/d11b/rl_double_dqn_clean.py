# expect-cause: none
import random
from collections import deque, namedtuple
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)
Transition = namedtuple("Transition", ("state", "action", "next_state", "reward", "done"))
N_OBS, N_ACTIONS, GAMMA, TAU = 6, 3, 0.99, 0.01


class ReplayMemory:
    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)


class DQN(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(N_OBS, 64), nn.ReLU(), nn.Linear(64, N_ACTIONS))

    def forward(self, x):
        return self.layers(x)


class Agent:
    def __init__(self):
        self.policy_net, self.target_net = DQN(), DQN()
        self.target_net.load_state_dict(self.policy_net.state_dict())
        self.optimizer = torch.optim.AdamW(self.policy_net.parameters(), lr=1e-3, amsgrad=True)
        self.memory = ReplayMemory(1000)
        self.last_q = None

    def select_action(self, state, eps):
        q = self.policy_net(state)
        self.last_q = q.detach()
        if random.random() < eps:
            return torch.tensor(random.randrange(N_ACTIONS))
        return q.argmax()

    def optimize_model(self, batch_size=32):
        if len(self.memory.memory) < batch_size:
            return None
        batch = Transition(*zip(*self.memory.sample(batch_size)))
        state, action = torch.stack(batch.state), torch.stack(batch.action)
        next_state, reward, done = torch.stack(batch.next_state), torch.stack(batch.reward), torch.stack(batch.done)
        q_sa = self.policy_net(state).gather(1, action.view(-1, 1)).squeeze(1)
        with torch.no_grad():
            next_action = self.policy_net(next_state).argmax(1, keepdim=True)
            next_q = self.target_net(next_state).gather(1, next_action).squeeze(1)
            expected = reward + GAMMA * next_q * (1 - done)
        loss = F.smooth_l1_loss(q_sa, expected)
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(self.policy_net.parameters(), 100)
        self.optimizer.step()
        with torch.no_grad():
            for p, tp in zip(self.policy_net.parameters(), self.target_net.parameters()):
                tp.mul_(1 - TAU).add_(TAU * p)
        return loss.item()


agent = Agent()
state = torch.randn(N_OBS)
for step in range(80):
    action = agent.select_action(state, eps=max(0.05, 1 - step / 40))
    next_state = 0.8 * state + 0.2 * torch.randn(N_OBS)
    reward = (action == state[:N_ACTIONS].argmax()).float()
    done = torch.tensor(float(step % 40 == 39))
    agent.memory.push(state, action, next_state, reward, done)
    state = torch.randn(N_OBS) if done else next_state
    loss = agent.optimize_model()
    if step % 40 == 39:
        print(f"step {step} loss {loss:.4f} q {agent.last_q.max():.3f}")
