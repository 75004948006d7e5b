# expect-cause: none
import torch
import torch.nn as nn

torch.manual_seed(0)


def cox_ph_loss(log_h, durations, events, eps=1e-7):
    order = torch.argsort(durations, descending=True)
    log_h, events = log_h[order].view(-1), events[order].view(-1)
    gamma = log_h.max()
    log_cumsum_h = log_h.sub(gamma).exp().cumsum(0).add(eps).log().add(gamma)
    return -log_h.sub(log_cumsum_h).mul(events).sum().div(events.sum().clamp(min=1.0))


class CoxPH:
    def __init__(self, net, lr=1e-3):
        self.net = net
        self.optimizer = torch.optim.Adam(net.parameters(), lr=lr)
        self.baseline_hazards_ = None
        self.risk_history = []

    def compute_baseline_hazards(self, x, durations, events):
        with torch.no_grad():
            exp_h = self.net(x).exp().view(-1)
        times = torch.unique(durations)
        at_risk = (durations[None, :] >= times[:, None]).float() @ exp_h
        n_events = (durations[None, :] == times[:, None]).float() @ events
        self.baseline_hazards_ = n_events / at_risk
        return self.baseline_hazards_

    def fit(self, x, durations, events, batch_size=64, epochs=4):
        for epoch in range(epochs):
            perm = torch.randperm(len(x))
            for start in range(0, len(x), batch_size):
                idx = perm[start:start + batch_size]
                log_h = self.net(x[idx])
                loss = cox_ph_loss(log_h, durations[idx], events[idx])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                self.risk_history.append(log_h.detach().mean())
            self.compute_baseline_hazards(x, durations, events)
            print(f"epoch {epoch} loss {loss.item():.4f} mean log-risk {torch.stack(self.risk_history[-4:]).mean():.3f}")
        return self


x = torch.randn(256, 9)
true_risk = x[:, 0] - 0.5 * x[:, 1] ** 2
durations = torch.distributions.Exponential(true_risk.exp()).sample().clamp(max=5.0).round(decimals=1)
events = (torch.rand(256) < 0.7).float()
net = nn.Sequential(nn.Linear(9, 32), nn.ReLU(), nn.BatchNorm1d(32), nn.Dropout(0.1), nn.Linear(32, 1, bias=False))
model = CoxPH(net).fit(x, durations, events)
print("baseline hazard at first times:", model.baseline_hazards_[:3])
