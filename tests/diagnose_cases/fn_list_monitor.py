"""A custom Huber loss Function; backward on [huber, reg] together, then a per-task grad-norm monitor backprops huber again."""

# expect-cause: same-loss-twice
# expect-fix: once
# expect-not-fix: retain_graph=True
import torch
from torch import nn

torch.manual_seed(0)


class Huber(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pred, target):
        diff = pred - target
        ctx.save_for_backward(diff)
        small = diff.abs() < 1
        return torch.where(small, 0.5 * diff**2, diff.abs() - 0.5).mean()

    @staticmethod
    def backward(ctx, grad):
        (diff,) = ctx.saved_tensors
        return grad * diff.clamp(-1, 1) / diff.numel(), None


model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(3):
    x, y = torch.randn(8, 6), torch.randn(8, 1)
    huber = Huber.apply(model(x), y)  # expect: forward
    reg = 1e-3 * sum(p.pow(2).sum() for p in model.parameters())
    opt.zero_grad()
    torch.autograd.backward([huber, reg])  # expect: frees
    if step % 2 == 0:  # monitor: how much of the gradient comes from the data term?
        saved = [p.grad.clone() for p in model.parameters()]
        opt.zero_grad()
        torch.autograd.backward([huber])  # expect: raises
        data_norm = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
        print(f"data grad norm {data_norm.item():.4f}")
        for p, g in zip(model.parameters(), saved, strict=True):
            p.grad = g
    opt.step()
    print(f"step {step}: {huber.item():.5f}")
