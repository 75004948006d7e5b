"""A physics-informed net taking u_x and u_t with two autograd.grad calls on the same output."""

# expect-cause: shared-forward
# expect-fix: create_graph=True
# expect-fix: both
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for it in range(3):
    x = torch.rand(50, 1, requires_grad=True)
    t = torch.rand(50, 1, requires_grad=True)
    u = net(torch.cat([x, t], dim=1))  # expect: forward
    u_x = torch.autograd.grad(u.sum(), x)[0]  # expect: frees
    u_t = torch.autograd.grad(u.sum(), t)[0]  # expect: raises
    residual = u_t + 0.5 * u_x
    boundary = net(torch.cat([torch.zeros(10, 1), torch.rand(10, 1)], dim=1))
    loss = residual.pow(2).mean() + boundary.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"iter {it}: {loss.item():.5f}")
