# expect-cause: carried-state
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Generator(nn.Module):
    def __init__(self, z_dim=16, w_dim=16, img=8):
        super().__init__()
        self.mapping = nn.Sequential(nn.Linear(z_dim, w_dim), nn.LeakyReLU(0.2), nn.Linear(w_dim, w_dim))
        self.synth = nn.Sequential(nn.Linear(w_dim, 64), nn.LeakyReLU(0.2), nn.Linear(64, img * img))
        self.img = img

    def forward(self, z, return_latents=False):
        w = self.mapping(z)
        out = self.synth(w).view(-1, 1, self.img, self.img)
        return (out, w) if return_latents else out


def g_path_regularize(fake_img, latents, mean_path_length, decay=0.01):
    noise = torch.randn_like(fake_img) / math.sqrt(fake_img.shape[2] * fake_img.shape[3])
    grad, = torch.autograd.grad(outputs=(fake_img * noise).sum(), inputs=latents, create_graph=True)
    path_lengths = torch.sqrt(grad.pow(2).sum(1))
    path_mean = mean_path_length + decay * (path_lengths.mean() - mean_path_length)  # expect: forward
    path_penalty = (path_lengths - path_mean).pow(2).mean()
    return path_penalty, path_mean, path_lengths


torch.manual_seed(0)
generator = Generator()
discriminator = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
g_optim = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.0, 0.99))
d_optim = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.0, 0.99))
g_reg_every, path_regularize, mean_path_length = 2, 2.0, 0

for i in range(8):
    real = torch.randn(8, 1, 8, 8)
    fake = generator(torch.randn(8, 16))
    d_loss = F.softplus(discriminator(fake.detach())).mean() + F.softplus(-discriminator(real)).mean()
    d_optim.zero_grad()
    d_loss.backward()
    d_optim.step()

    g_loss = F.softplus(-discriminator(generator(torch.randn(8, 16)))).mean()
    g_optim.zero_grad()
    g_loss.backward()
    g_optim.step()

    if i % g_reg_every == 0:
        fake_img, latents = generator(torch.randn(4, 16), return_latents=True)
        path_loss, mean_path_length, path_lengths = g_path_regularize(fake_img, latents, mean_path_length)
        weighted_path_loss = path_regularize * g_reg_every * path_loss
        generator.zero_grad()
        weighted_path_loss.backward()  # expect: raises frees
        g_optim.step()
        print(i, d_loss.item(), g_loss.item(), path_loss.item(), float(mean_path_length))
