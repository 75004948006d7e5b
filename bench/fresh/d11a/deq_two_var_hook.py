# expect-cause: same-loss-twice
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import autograd

torch.manual_seed(0)


def forward_iteration(f, x0, max_iter=30, tol=1e-4):
    f0 = f(x0)
    res = []
    for k in range(max_iter):
        x = f0
        f0 = f(x)
        res.append((f0 - x).norm().item() / (1e-5 + f0.norm().item()))
        if res[-1] < tol:
            break
    return f0, res


class CoupledCell(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.Wx, self.Wy = nn.Linear(2 * n, n, bias=False), nn.Linear(2 * n, n, bias=False)
        self.Ux, self.Uy = nn.Linear(n, n), nn.Linear(n, n)
        for lin in (self.Wx, self.Wy):
            nn.init.normal_(lin.weight, std=0.3 / n ** 0.5)

    def forward(self, zx, zy, x):
        z = torch.cat([zx, zy], dim=1)
        return torch.tanh(self.Wx(z) + self.Ux(x)), torch.tanh(self.Wy(z) + self.Uy(x))  # expect: forward


class DEQFixedPoint(nn.Module):
    def __init__(self, f, solver, **kwargs):
        super().__init__()
        self.f, self.solver, self.kwargs = f, solver, kwargs

    def forward(self, x):
        with torch.no_grad():
            zx, zy = torch.zeros_like(x), torch.zeros_like(x)
            for _ in range(20):
                zx, zy = self.f(zx, zy, x)
        zx, zy = self.f(zx, zy, x)
        zx0, zy0 = zx.clone().detach().requires_grad_(), zy.clone().detach().requires_grad_()
        fx0, fy0 = self.f(zx0, zy0, x)  # expect: forward

        def backward_hook_x(grad):
            g, self.backward_res_x = self.solver(lambda y: autograd.grad(fx0, zx0, y)[0] + grad, grad, **self.kwargs)
            return g

        def backward_hook_y(grad):
            g, self.backward_res_y = self.solver(lambda y: autograd.grad(fy0, zy0, y)[0] + grad, grad, **self.kwargs)  # expect: raises frees
            return g

        zx.register_hook(backward_hook_x)
        zy.register_hook(backward_hook_y)
        return zx, zy


class Model(nn.Module):
    def __init__(self, n_in=16, n=24, n_cls=5):
        super().__init__()
        self.inp = nn.Linear(n_in, n)
        self.deq = DEQFixedPoint(CoupledCell(n), forward_iteration, max_iter=12)
        self.out = nn.Linear(2 * n, n_cls)

    def forward(self, x):
        zx, zy = self.deq(self.inp(x))
        return self.out(torch.cat([zx, zy], dim=1))


model = Model()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    X, y = torch.randn(32, 16), torch.randint(0, 5, (32,))
    loss = F.cross_entropy(model(X), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
