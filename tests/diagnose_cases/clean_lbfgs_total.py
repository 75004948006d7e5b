"""Clean: LBFGS with the forward inside its closure, and an epoch total kept as a tensor for logging."""

# expect-clean
# expect-cause: none
import torch
from torch import nn

torch.manual_seed(0)
xs = torch.linspace(-2, 2, 64).unsqueeze(1)
ys = torch.sin(2 * xs) + 0.05 * torch.randn(64, 1)
model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)
total = 0
for epoch in range(3):

    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(xs), ys)
        loss.backward()
        return loss

    loss = opt.step(closure)
    total = total + loss
    print(f"epoch {epoch}: {loss.item():.6f} total {total.item():.6f}")
