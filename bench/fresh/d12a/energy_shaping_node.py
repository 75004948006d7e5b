# Neural-ODE energy shaping of multi-agent double integrators, Lightning-style learner (DiffEqML/torchdyn issue #141)
# expect-cause: carried-state
import torch
import torch.nn as nn
from torch.distributions import Normal

torch.manual_seed(0)
batch_size, n_agents = 16, 1
_agent_states = {}


def set_initial_conditions(n_agents):
    if n_agents not in _agent_states:
        _agent_states[n_agents] = torch.rand((batch_size, n_agents * 4))
    return _agent_states[n_agents], n_agents


class ControlledSystem(nn.Module):
    def __init__(self, n_agents):
        super().__init__()
        self.u = nn.Sequential(nn.Linear(n_agents * 4, 32), nn.Tanh(), nn.Linear(32, n_agents * 2))

    def forward(self, t, x):
        q, p = x[:, :-1].chunk(2, dim=1)
        u = self.u(x[:, :-1])
        dxdt = torch.cat([p, u - 0.1 * p], 1)
        dldt = (u ** 2).sum(1, keepdim=True)
        return torch.cat([dxdt, dldt], 1)

    def odeint(self, x, t_span):
        xs = [x]
        for t0, t1 in zip(t_span[:-1], t_span[1:]):
            x = x + (t1 - t0) * self(t0, x)  # expect: forward
            xs.append(x)
        return t_span, torch.stack(xs)


def weighted_log_likelihood_loss(x, target, weight):
    log_prob = target.log_prob(x)
    weighted_log_p = weight * log_prob
    return -torch.mean(weighted_log_p.sum(1))


class EnergyShapingLearner(nn.Module):
    def __init__(self, model, target_dist, t_span, n_agents=1):
        super().__init__()
        self.model, self.target, self.t_span = model, target_dist, t_span
        self.n_agents, self.batch_size, self.lr = n_agents, batch_size, 5e-3
        self.weight = torch.ones(n_agents * 2).reshape(1, n_agents * 2)

    def forward(self, x):
        return self.model.odeint(x, self.t_span)

    def training_step(self, batch, batch_idx):
        x0, _ = set_initial_conditions(self.n_agents)
        x0 = torch.cat([x0, torch.zeros(self.batch_size, 1)], -1).to(x0)
        xs, xTl = self(x0)
        xT, l = xTl[-1, :, :2], xTl[-1, :, -1:]
        _agent_states[self.n_agents] = xTl[-1, :, :-1]
        terminal_loss = weighted_log_likelihood_loss(xT, self.target, self.weight.to(xT))
        integral_loss = torch.mean(l)
        return 0.01 * integral_loss + terminal_loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.lr)


learn = EnergyShapingLearner(ControlledSystem(n_agents), Normal(torch.zeros(2), 0.1 * torch.ones(2)),
                             torch.linspace(0, 1, 12), n_agents)
optimizer = learn.configure_optimizers()
for batch_idx in range(5):
    def closure():
        optimizer.zero_grad()
        loss = learn.training_step(None, batch_idx)
        loss.backward()  # expect: raises frees
        return loss
    loss = optimizer.step(closure)
    print('step', batch_idx, 'loss', loss.item())
