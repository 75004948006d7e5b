"""An online Kalman filter with learned dynamics and noise; the state covariance P is carried from one update to the next."""

# expect-cause: carried-state
# expect-fix: detach
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class KalmanFilter(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.F = nn.Parameter(torch.eye(n) + 0.01 * torch.randn(n, n))
        self.log_q = nn.Parameter(torch.zeros(n))
        self.log_r = nn.Parameter(torch.zeros(n))

    def step(self, mean, P, z):
        mean = self.F @ mean
        P = self.F @ P @ self.F.T + torch.diag(self.log_q.exp())
        S = P + torch.diag(self.log_r.exp())  # expect: forward
        K = P @ torch.linalg.inv(S)
        innovation = z - mean
        return mean + K @ innovation, (torch.eye(len(mean)) - K) @ P, innovation, S


kf = KalmanFilter(3)
opt = torch.optim.Adam(kf.parameters(), lr=1e-2)
mean, P = torch.zeros(3), torch.eye(3)
for t in range(4):
    z = torch.randn(3)
    mean, P, innovation, S = kf.step(mean.detach(), P, z)
    nll = 0.5 * (innovation @ torch.linalg.solve(S, innovation) + torch.logdet(S))
    opt.zero_grad()
    nll.backward()  # expect: raises frees
    opt.step()
    print(f"t {t}: {nll.item():.5f}")
