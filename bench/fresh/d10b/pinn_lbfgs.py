# expect-cause: carried-state
import math
import torch
import torch.nn as nn


class PINN(nn.Module):
    def __init__(self, width=20, depth=3):
        super().__init__()
        layers, d_in = [], 2
        for _ in range(depth):
            layers += [nn.Linear(d_in, width), nn.Tanh()]
            d_in = width
        layers.append(nn.Linear(d_in, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x, t):
        return self.net(torch.cat([x, t], dim=1))


def grad(out, inp):
    return torch.autograd.grad(out, inp, grad_outputs=torch.ones_like(out), create_graph=True)[0]


torch.manual_seed(0)
nu = 0.01 / math.pi
model = PINN()
optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=3, history_size=10)

x_f = (torch.rand(100, 1) * 2 - 1).requires_grad_(True)
t_f = torch.rand(100, 1).requires_grad_(True)
x_0 = torch.linspace(-1, 1, 50).unsqueeze(1)
t_0 = torch.zeros_like(x_0)
u_0 = -torch.sin(math.pi * x_0)

u = model(x_f, t_f)
u_t = grad(u, t_f)
u_x = grad(u, x_f)
u_xx = grad(u_x, x_f)
residual = u_t + u * u_x - nu * u_xx  # expect: forward


def closure():
    optimizer.zero_grad()
    loss_f = residual.pow(2).mean()
    loss_0 = (model(x_0, t_0) - u_0).pow(2).mean()
    loss = loss_f + loss_0
    loss.backward()  # expect: raises frees
    return loss


for epoch in range(2):
    loss = optimizer.step(closure)
    print(f"epoch {epoch}: loss {loss.item():.5f}")
