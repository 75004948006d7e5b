# expect-cause: carried-state
import math
import torch
from torch import nn
import torch.nn.functional as F


class RBFKernel(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw_lengthscale = nn.Parameter(torch.zeros(1))
        self.raw_outputscale = nn.Parameter(torch.zeros(1))

    def forward(self, x1, x2):
        ls, os_ = F.softplus(self.raw_lengthscale), F.softplus(self.raw_outputscale)
        return os_ * torch.exp(-0.5 * torch.cdist(x1 / ls, x2 / ls).pow(2))


class DefaultPredictionStrategy:
    def __init__(self, train_x, train_y, mean, covar_module, noise):
        K = covar_module(train_x, train_x) + noise * torch.eye(train_x.shape[0])
        self.chol_cache = torch.linalg.cholesky(K)
        self.mean_cache = torch.cholesky_solve((train_y - mean).unsqueeze(-1), self.chol_cache)  # expect: forward


class ExactGPModel(nn.Module):
    def __init__(self, train_x, train_y):
        super().__init__()
        self.train_x, self.train_y = train_x, train_y
        self.constant_mean = nn.Parameter(torch.zeros(1))
        self.covar_module = RBFKernel()
        self.raw_noise = nn.Parameter(torch.tensor([-2.0]))
        self.prediction_strategy = None

    def forward(self, x):
        noise = F.softplus(self.raw_noise)
        if self.training:
            K = self.covar_module(x, x) + noise * torch.eye(x.shape[0])
            return self.constant_mean.expand(x.shape[0]), K
        if self.prediction_strategy is None:
            self.prediction_strategy = DefaultPredictionStrategy(
                self.train_x, self.train_y, self.constant_mean, self.covar_module, noise)
        ps = self.prediction_strategy
        k_star = self.covar_module(x, self.train_x)
        mean = self.constant_mean + (k_star @ ps.mean_cache).squeeze(-1)
        v = torch.linalg.solve_triangular(ps.chol_cache, k_star.T, upper=False)
        var = self.covar_module(x, x).diagonal() - v.pow(2).sum(0)
        return mean, var.clamp_min(1e-9)


def batch_expected_improvement(x, model, best_f):
    mean, var = model(x.unsqueeze(-1))
    sigma = var.sqrt()
    u = (mean - best_f) / sigma
    normal = torch.distributions.Normal(0.0, 1.0)
    return (sigma * (u * normal.cdf(u) + normal.log_prob(u).exp())).sum()


torch.manual_seed(0)
train_x = torch.rand(20, 1)
train_y = torch.sin(train_x.squeeze(-1) * (2 * math.pi)) + 0.1 * torch.randn(20)
model = ExactGPModel(train_x, train_y)
model.train()
optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
for i in range(30):
    optimizer.zero_grad()
    mean, K = model(train_x)
    loss = -torch.distributions.MultivariateNormal(mean, K).log_prob(train_y) / 20
    loss.backward()
    optimizer.step()

model.eval()
x = torch.tensor([0.25], requires_grad=True)
optimizer = torch.optim.Adam([x], lr=0.1)
for i in range(50):
    optimizer.zero_grad()
    loss = -batch_expected_improvement(x, model, train_y.max())
    loss.backward()  # expect: raises frees
    optimizer.step()
print('candidate', x.item())
