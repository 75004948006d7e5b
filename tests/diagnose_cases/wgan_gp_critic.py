"""A WGAN-GP critic trained five times per generator step on one fake batch that is not detached.

Rebuilt from the structure of issue-tracker questions about WGAN-GP training loops: the fake
batch is generated once per generator step, the critic loop scores it `critic_iters` times
and adds a gradient penalty on interpolates between real and fake; the first critic backward
also goes back through the generator and frees its graph, and the second fails there. The
critic's steps share the generator's one forward pass (the GAN pattern, not state carried from
an earlier training step: the generator has not stepped in between). The fix: build the
critic's inputs from `fake.detach()` (the generator step scores `fake` again).
"""

# expect-cause: shared-forward
# expect-not-fix: retain_graph
# expect-fix: fake
# expect-fix: detach
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

for _step in range(2):
    real = torch.randn(16, 2) * 0.3
    fake = generator(torch.randn(16, 4))  # expect: forward
    for _ in range(critic_iters):
        gp = gradient_penalty(critic, real, fake)
        loss_c = critic(fake).mean() - critic(real).mean() + lambda_gp * gp
        opt_c.zero_grad()
        loss_c.backward()  # expect: raises frees
        opt_c.step()
    loss_g = -critic(generator(torch.randn(16, 4))).mean()
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
