"""A spiking network whose LIF neurons keep their membrane potential on self.v across batches."""

# expect-cause: carried-state
# expect-fix: .v
# expect-not-fix: `out`
import torch
from torch import nn

torch.manual_seed(0)


class SpikeFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return (v > 1.0).float()

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return grad / (1 + (10 * (v - 1.0)).abs()) ** 2


class LIF(nn.Module):
    def __init__(self):
        super().__init__()
        self.v = None

    def forward(self, x):
        self.v = x if self.v is None else 0.9 * self.v + x
        spike = SpikeFn.apply(self.v)  # expect: forward
        self.v = self.v - spike
        return spike


net = nn.Sequential(nn.Linear(20, 32), LIF(), nn.Linear(32, 4))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for batch in range(3):
    x, y = torch.rand(8, 20), torch.randint(0, 4, (8,))
    out = sum(net(x) for _t in range(4)) / 4
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"batch {batch}: {loss.item():.4f}")
