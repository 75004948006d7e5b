"""A Glow-style flow whose invertible mixing layer's log-determinant is computed once, before the loop.

Rebuilt from the structure of forum and issue-tracker questions about normalizing-flow training
loops: the flow stacks affine coupling layers around an invertible linear "1x1 conv" mixing
layer, and the log-likelihood needs log|det W| of that layer's weight. It does not depend on
the batch, so the script computes it once before the loop ("it is the same for every sample")
and adds it to every step's negative log-likelihood. The first step's backward frees its
slogdet graph; the second step's backward needs it again. It is state carried from before the
loop (W is a trained parameter: after opt.step() the cached value is also stale). The fix:
compute the log-determinant inside the loop, each step (in the flow's forward). Detaching the
cached value silences the error but is a trap: W then gets no gradient from the log-det term,
so the loss is no longer the likelihood and the -log|det W| pull that keeps W invertible is lost.
"""

# expect-cause: carried-state
# expect-where: before the loop
# expect-fix: inside the loop
# expect-not-fix: detach
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class Coupling(nn.Module):
    def __init__(self, dim=4, hidden=32):
        super().__init__()
        self.half = dim // 2
        self.net = nn.Sequential(nn.Linear(self.half, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, x):
        xa, xb = x[:, : self.half], x[:, self.half :]
        log_s, t = self.net(xa).chunk(2, dim=1)
        log_s = torch.tanh(log_s)
        return torch.cat([xa, xb * log_s.exp() + t], dim=1), log_s.sum(dim=1)


class InvertibleLinear(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.weight = nn.Parameter(torch.linalg.qr(torch.randn(dim, dim))[0])

    def forward(self, x):
        return x @ self.weight.t()

    def log_det(self):
        return torch.linalg.slogdet(self.weight)[1]  # expect: forward


coupling1, mix, coupling2 = Coupling(), InvertibleLinear(), Coupling()
params = [*coupling1.parameters(), *mix.parameters(), *coupling2.parameters()]
opt = torch.optim.Adam(params, lr=1e-3)
prior = torch.distributions.Normal(torch.zeros(4), torch.ones(4))
mixing = torch.tensor([[1.0, 0.5, 0, 0], [0, 1, 0.3, 0], [0, 0, 1, 0], [0.2, 0, 0, 1]])
data = torch.randn(256, 4) @ mixing
log_det_w = mix.log_det()  # the same for every batch: computed once
for epoch in range(2):
    for start in range(0, 256, 64):
        x = data[start : start + 64]
        h, ld1 = coupling1(x)
        z, ld2 = coupling2(mix(h))
        log_px = prior.log_prob(z).sum(dim=1) + ld1 + ld2 + log_det_w
        loss = -log_px.mean()
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        opt.step()
    print(f"epoch {epoch}: nll {loss.item():.4f}")
