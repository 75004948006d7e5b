"""Curve fitting with LBFGS whose closure calls backward on a loss computed outside it."""

# expect-cause: same-loss-twice
# expect-fix: inside the closure
# expect-not-fix: remove the call
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)
xs = torch.linspace(-2, 2, 64).unsqueeze(1)
ys = torch.sin(2 * xs) + 0.05 * torch.randn(64, 1)
model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)
for epoch in range(3):
    pred = model(xs)
    loss = nn.functional.mse_loss(pred, ys)  # expect: forward

    def closure():
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        return loss

    opt.step(closure)  # expect: caller-raises
    print(f"epoch {epoch}: {loss.item():.5f}")
