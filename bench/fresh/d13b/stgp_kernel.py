# expect-cause: carried-state
import math
import torch
import torch.nn as nn

torch.manual_seed(0)


class ARDKernel(nn.Module):
    def __init__(self, input_dim, initial_length_scale=1.0, initial_signal_variance=1.0):
        super().__init__()
        self.length_scales = torch.exp(nn.Parameter(torch.ones(input_dim) * math.log(initial_length_scale)))  # expect: forward
        self.log_signal_variance = nn.Parameter(torch.tensor(math.log(initial_signal_variance)))

    def forward(self, x1, x2):
        x1, x2 = x1 / self.length_scales, x2 / self.length_scales
        sqdist = (x1 ** 2).sum(1, keepdim=True) + (x2 ** 2).sum(1) - 2 * x1 @ x2.T
        return self.log_signal_variance.exp() * torch.exp(-0.5 * sqdist)


class STGP(nn.Module):
    def __init__(self, space_dim, time_dim):
        super().__init__()
        self.space_dim = space_dim
        self.kernel_space = ARDKernel(space_dim)
        self.kernel_time = ARDKernel(time_dim)
        self.log_beta = nn.Parameter(torch.tensor(2.0))

    def kernel(self, x1, x2):
        s, t = self.space_dim, self.space_dim
        return self.kernel_space(x1[:, :s], x2[:, :s]) * self.kernel_time(x1[:, t:], x2[:, t:])

    def negative_log_likelihood(self, x, y):
        n = x.shape[0]
        K = self.kernel(x, x) + self.log_beta.exp().pow(-1) * torch.eye(n)
        L = torch.linalg.cholesky(K + 1e-6 * torch.eye(n))
        alpha = torch.cholesky_solve(y, L)
        return 0.5 * (y * alpha).sum() + torch.log(torch.diagonal(L)).sum() + 0.5 * n * math.log(2 * math.pi)

    def forward(self, x_train, y_train, x_test):
        K_s = self.kernel(x_train, x_test)
        K = self.kernel(x_train, x_train) + self.log_beta.exp().pow(-1) * torch.eye(len(x_train))
        return K_s.T @ torch.linalg.solve(K, y_train)


# sensors on a 2-D field, observed at several times
xs = torch.rand(60, 2)
ts = torch.rand(60, 1)
x_train = torch.cat([xs, ts], 1)
y_train = (torch.sin(4 * xs[:, :1]) * torch.cos(3 * xs[:, 1:]) + 0.5 * ts + 0.05 * torch.randn(60, 1))

model = STGP(space_dim=2, time_dim=1)
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
for i in range(50):
    optimizer.zero_grad()
    loss = model.negative_log_likelihood(x_train, y_train)
    loss.backward()  # expect: raises frees
    optimizer.step()
    if i % 10 == 0:
        print(f"iter {i} nll {loss.item():.3f}")
print(model(x_train, y_train, x_train[:5]).squeeze())
