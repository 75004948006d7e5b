# https://github.com/pytorch/pytorch/issues/65536
# An implicit-layer style custom Function whose backward calls autograd.grad on a graph built in its forward;
# a multi-task loop takes each task's gradient separately (retain_graph=True on the first).
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ImplicitTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        with torch.enable_grad():
            xd = x.detach().requires_grad_()
            wd = weight.detach().requires_grad_()
            z = torch.tanh(xd @ wd.t())
            for _ in range(3):  # a few fixed-point iterations z = tanh(W z + x)
                z = torch.tanh(z @ wd.t() + xd)
        ctx.xd, ctx.wd, ctx.z = xd, wd, z
        return z.detach()

    @staticmethod
    def backward(ctx, grad_z):
        gx, gw = torch.autograd.grad(ctx.z, (ctx.xd, ctx.wd), grad_z)
        return gx, gw


class Net(nn.Module):
    def __init__(self, d=16, n_cls=5):
        super().__init__()
        self.inp = nn.Linear(10, d)
        self.core = nn.Parameter(torch.randn(d, d) * 0.1)
        self.head = nn.Linear(d, n_cls)
        self.rec = nn.Linear(d, 10)

    def forward(self, x):
        z = ImplicitTanh.apply(self.inp(x), self.core)
        return self.head(z), self.rec(z)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(32, 10), torch.randint(0, 5, (32,))
    logits, recon = model(x)
    task_losses = [F.cross_entropy(logits, y), F.mse_loss(recon, x)]
    opt.zero_grad()
    norms = []
    for i, task_loss in enumerate(task_losses):
        task_loss.backward(retain_graph=i < len(task_losses) - 1)
        norms.append(
            sum(p.grad.norm() ** 2 for p in model.parameters() if p.grad is not None) ** 0.5
        )
    opt.step()
    print(
        f"step {step}: losses {[round(t.item(), 4) for t in task_losses]} grad norms {[round(n.item(), 3) for n in norms]}"
    )
