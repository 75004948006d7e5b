"""Clean: a PINN weighting its boundary loss by gradient statistics (learning-rate annealing).

Rebuilt from the structure of physics-informed network code after Wang, Teng & Perdikaris
(2021) and the forum questions about it: u(x) is an nn.Sequential of nn.Linear and nn.Tanh,
the residual of u'' = f needs derivatives taken with create_graph=True, and every step each
loss's gradients with respect to the parameters are taken with torch.autograd.grad and
retain_graph=True (allow_unused=True: the output bias is not in the residual's graph) to set
the boundary weight, before the weighted total goes back once and the optimizer steps.
Retaining is legitimate here: no step runs between the calls, and nothing is kept across steps
(the weight is a detached number). Nothing to report.
"""

# expect-clean
# expect-cause: none
import math

import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(1, 20), nn.Tanh(), nn.Linear(20, 20), nn.Tanh(), nn.Linear(20, 1))
params = list(net.parameters())
opt = torch.optim.Adam(params, lr=1e-3)
weight, alpha = 1.0, 0.9
x_b, u_b = torch.tensor([[0.0], [1.0]]), torch.zeros(2, 1)
for step in range(4):
    x = torch.rand(32, 1, requires_grad=True)
    u = net(x)
    du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
    d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
    loss_r = (d2u + math.pi**2 * torch.sin(math.pi * x)).pow(2).mean()
    loss_b = nn.functional.mse_loss(net(x_b), u_b)
    grad_r = torch.autograd.grad(loss_r, params, retain_graph=True, allow_unused=True)
    grad_b = torch.autograd.grad(loss_b, params, retain_graph=True)
    max_r = max(g.abs().max() for g in grad_r if g is not None)
    mean_b = torch.cat([g.abs().flatten() for g in grad_b]).mean()
    weight = alpha * weight + (1 - alpha) * (max_r / mean_b).item()
    loss = loss_r + weight * loss_b
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step}: residual {loss_r.item():.6f} boundary {loss_b.item():.6f} w {weight:.4f}")
