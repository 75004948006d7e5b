# expect-cause: carried-state
import math
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)


class LargeFeatureExtractor(nn.Sequential):
    def __init__(self, data_dim, out_dim=2):
        super().__init__(nn.Linear(data_dim, 32), nn.Tanh(), nn.Linear(32, out_dim))


class ExactGPModel(nn.Module):
    """Zero-mean exact GP with a scaled RBF kernel and Gaussian likelihood."""

    def __init__(self, train_inputs, train_targets):
        super().__init__()
        self.train_inputs, self.train_targets = train_inputs, train_targets
        self.raw_lengthscale = nn.Parameter(torch.zeros(1))
        self.raw_outputscale = nn.Parameter(torch.zeros(1))
        self.raw_noise = nn.Parameter(torch.tensor([-2.0]))

    def covar(self, a, b):
        sq = torch.cdist(a, b).pow(2) / nn.functional.softplus(self.raw_lengthscale).pow(2)
        return nn.functional.softplus(self.raw_outputscale) * torch.exp(-0.5 * sq)

    def marginal_log_likelihood(self, x, y):
        n = y.shape[0]
        K = self.covar(x, x) + (nn.functional.softplus(self.raw_noise) + 1e-4) * torch.eye(n)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L)
        return (-0.5 * (y.unsqueeze(-1) * alpha).sum() - torch.log(torch.diagonal(L)).sum()
                - 0.5 * n * math.log(2 * math.pi)) / n


train_x = torch.rand(60, 6)
train_y = torch.sin(3 * train_x[:, 0]) + train_x[:, 1] ** 2 + 0.05 * torch.randn(60)
train_y = (train_y - train_y.mean()) / train_y.std()

feature_extractor = LargeFeatureExtractor(data_dim=6)
train_z = feature_extractor(train_x)  # expect: forward
model = ExactGPModel(train_z, train_y)
optimizer = torch.optim.LBFGS(list(model.parameters()) + list(feature_extractor.parameters()), lr=0.1,
                              max_iter=10, line_search_fn="strong_wolfe")


def fit(model, optimizer, epochs=3):
    for epoch in range(epochs):
        def closure():
            optimizer.zero_grad()
            loss = -model.marginal_log_likelihood(model.train_inputs, model.train_targets)
            loss.backward()  # expect: raises frees
            return loss

        loss = optimizer.step(closure)
        print(f"epoch {epoch} -mll {loss.item():.4f} "
              f"lengthscale {nn.functional.softplus(model.raw_lengthscale).item():.3f}")


fit(model, optimizer)
