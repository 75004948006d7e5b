# expect-cause: carried-state
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal

torch.manual_seed(0)
OBS_DIM, ACT_DIM, HIDDEN = 8, 2, 64


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS_DIM, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 2 * ACT_DIM))

    def sample(self, state):
        mean, log_std = self.net(state).chunk(2, dim=-1)
        std = log_std.clamp(-20, 2).exp()
        dist = Normal(mean, std)
        x_t = dist.rsample()
        action = torch.tanh(x_t)
        log_prob = dist.log_prob(x_t) - torch.log(1 - action.pow(2) + 1e-6)
        return action, log_prob.sum(-1, keepdim=True)


class SoftQ(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(OBS_DIM + ACT_DIM, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1))

    def forward(self, state, action):
        return self.net(torch.cat([state, action], dim=-1))


class SACAgent:
    def __init__(self, gamma=0.99, tau=0.005):
        self.gamma, self.tau = gamma, tau
        self.policy = GaussianPolicy()
        self.q1, self.q2 = SoftQ(), SoftQ()
        self.q1_target, self.q2_target = copy.deepcopy(self.q1), copy.deepcopy(self.q2)
        self.policy_optimizer = torch.optim.Adam(self.policy.parameters(), lr=3e-4)
        self.q_optimizer = torch.optim.Adam(list(self.q1.parameters()) + list(self.q2.parameters()), lr=3e-4)
        self.expected_entropy = -float(ACT_DIM)
        self.log_alpha = torch.tensor(0.0, requires_grad=True)
        self.alpha = self.log_alpha.exp()  # expect: forward
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=3e-3)

    def update(self, state, action, reward, next_state, done):
        with torch.no_grad():
            next_action, next_log_prob = self.policy.sample(next_state)
            q_next = torch.min(self.q1_target(next_state, next_action), self.q2_target(next_state, next_action))
            q_target = reward + self.gamma * (1 - done) * (q_next - self.alpha * next_log_prob)
        q_loss = F.mse_loss(self.q1(state, action), q_target) + F.mse_loss(self.q2(state, action), q_target)
        self.q_optimizer.zero_grad()
        q_loss.backward()
        self.q_optimizer.step()

        new_action, log_prob = self.policy.sample(state)
        q_new = torch.min(self.q1(state, new_action), self.q2(state, new_action))
        policy_loss = (self.alpha * log_prob - q_new).mean()
        self.policy_optimizer.zero_grad()
        policy_loss.backward()  # expect: frees
        self.policy_optimizer.step()

        alpha_loss = -(self.alpha * (log_prob + self.expected_entropy).detach()).mean()
        self.alpha_optimizer.zero_grad()
        alpha_loss.backward()  # expect: raises
        self.alpha_optimizer.step()

        with torch.no_grad():
            for net, target in ((self.q1, self.q1_target), (self.q2, self.q2_target)):
                for p, tp in zip(net.parameters(), target.parameters()):
                    tp.mul_(1 - self.tau).add_(self.tau * p)
        return q_loss.item(), policy_loss.item(), alpha_loss.item()


buffer = {
    "state": torch.randn(256, OBS_DIM), "action": torch.rand(256, ACT_DIM) * 2 - 1,
    "reward": torch.randn(256, 1), "next_state": torch.randn(256, OBS_DIM), "done": (torch.rand(256, 1) < 0.05).float(),
}
agent = SACAgent()
for step in range(20):
    idx = torch.randint(0, 256, (32,))
    losses = agent.update(*(buffer[k][idx] for k in ("state", "action", "reward", "next_state", "done")))
    if step % 5 == 0:
        print(f"step {step} q {losses[0]:.3f} pi {losses[1]:.3f} alpha {agent.log_alpha.exp().item():.3f}")
