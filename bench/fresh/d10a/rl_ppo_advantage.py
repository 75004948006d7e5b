# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
STATE_DIM, N_ACTIONS, GAMMA, EPS = 4, 2, 0.99, 0.2


class ToyEnv:
    def reset(self):
        self.t = 0
        self.s = torch.randn(STATE_DIM)
        return self.s

    def step(self, a):
        self.t += 1
        self.s = 0.9 * self.s + 0.1 * torch.randn(STATE_DIM)
        r = float(self.s[0] > 0) if a == 1 else 0.5
        return self.s, r, self.t >= 20


class StateValueFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(STATE_DIM, 32), nn.Tanh(), nn.Linear(32, 1))
        self.optimizer = torch.optim.SGD(self.parameters(), lr=1e-2)

    def forward(self, s):
        return self.net(s).squeeze(-1)

    def sgd(self, prediction, target):
        loss = F.mse_loss(prediction, target)
        self.optimizer.zero_grad()
        loss.backward()  # expect: frees
        self.optimizer.step()


class ActionValueFunction(StateValueFunction):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(STATE_DIM + N_ACTIONS, 32), nn.Tanh(), nn.Linear(32, 1))
        self.optimizer = torch.optim.SGD(self.parameters(), lr=1e-2)

    def forward(self, s, a):
        return self.net(torch.cat([s, F.one_hot(torch.tensor(a), N_ACTIONS).float()])).squeeze(-1)  # expect: forward


class PolicyNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(STATE_DIM, 32), nn.Tanh(), nn.Linear(32, N_ACTIONS))
        self.optimizer = torch.optim.Adam(self.parameters(), lr=3e-4)
        self.surrogates = []

    def forward(self, s):
        return torch.distributions.Categorical(logits=self.net(s))

    def clipped_surrogate(self, log_prob, old_log_prob, advantage):
        ratio = torch.exp(log_prob - old_log_prob)
        clipped = torch.clamp(ratio, 1 - EPS, 1 + EPS)
        self.surrogates.append(torch.min(ratio * advantage, clipped * advantage))

    def sga(self):
        objective = torch.stack(self.surrogates).mean()
        self.optimizer.zero_grad()
        (-objective).backward()  # expect: raises
        self.optimizer.step()
        self.surrogates = []


env, policy = ToyEnv(), PolicyNetwork()
v_fn, q_fn = StateValueFunction(), ActionValueFunction()
for episode in range(3):
    s, done = env.reset(), False
    while not done:
        dist = policy(s)
        a = dist.sample().item()
        log_prob = dist.log_prob(torch.tensor(a))
        s_next, r, done = env.step(a)
        v = v_fn(s)
        q = q_fn(s, a)
        v_fn.sgd(v, torch.tensor(r) + GAMMA * v_fn(s_next).detach())
        q_fn.sgd(q, torch.tensor(r) + GAMMA * v_fn(s_next).detach())
        advantage = q - v
        policy.clipped_surrogate(log_prob, log_prob.detach(), advantage)
        s = s_next
    policy.sga()
    print("episode", episode, "done")
