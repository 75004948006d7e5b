"""A WGAN-GP step done right: the critic scores fake.detach(), the penalty keeps its graph.

The corrected form of the WGAN-GP reports (see wgan_gp_critic.py): the gradient penalty's
torch.autograd.grad call passes create_graph=True, so the critic's backward goes through the
penalty's graph once more by design; the generator step scores a fresh fake batch. It runs
without the error, and no gradient is added twice.
"""

# expect-clean
# expect-cause: none
import torch
from torch import nn

torch.manual_seed(0)


def gradient_penalty(critic, real, fake):
    eps = torch.rand(len(real), 1)
    interpolates = (eps * real + (1 - eps) * fake).requires_grad_(True)
    scores = critic(interpolates)
    (grads,) = torch.autograd.grad(scores.sum(), interpolates, create_graph=True)
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


generator = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2), nn.Tanh())
critic = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-4, betas=(0.0, 0.9))
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
critic_iters, lambda_gp = 5, 10.0

for step in range(2):
    real = torch.randn(16, 2) * 0.3
    fake = generator(torch.randn(16, 4)).detach()
    for _ in range(critic_iters):
        gp = gradient_penalty(critic, real, fake)
        loss_c = critic(fake).mean() - critic(real).mean() + lambda_gp * gp
        opt_c.zero_grad()
        loss_c.backward()
        opt_c.step()
    loss_g = -critic(generator(torch.randn(16, 4))).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    print(f"step {step}: critic {loss_c.item():.6f} generator {loss_g.item():.6f}")
