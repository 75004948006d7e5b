# expect-cause: carried-state
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
DIM, N_LATENTS, LATENT_DIM = 32, 8, 24


class RIN(nn.Module):
    def __init__(self):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(N_LATENTS, LATENT_DIM) * 0.02)
        self.time_mlp = nn.Sequential(nn.Linear(1, LATENT_DIM), nn.SiLU())
        self.init_self_cond_latents = nn.Sequential(nn.Linear(LATENT_DIM, LATENT_DIM), nn.LayerNorm(LATENT_DIM))
        self.read = nn.Linear(DIM, N_LATENTS * LATENT_DIM)
        self.process = nn.Sequential(nn.Linear(LATENT_DIM, LATENT_DIM), nn.GELU(), nn.Linear(LATENT_DIM, LATENT_DIM))
        self.write = nn.Linear(N_LATENTS * LATENT_DIM, DIM)

    def forward(self, x, times, latent_self_cond=None):
        b = x.shape[0]
        latents = self.latents.expand(b, -1, -1) + self.time_mlp(times[:, None]).unsqueeze(1)
        if latent_self_cond is not None:
            latents = latents + self.init_self_cond_latents(latent_self_cond)
        latents = latents + self.read(x).view(b, N_LATENTS, LATENT_DIM)
        latents = latents + self.process(latents)  # expect: forward
        return self.write(latents.flatten(1)), latents


class GaussianDiffusion(nn.Module):
    def __init__(self, model, train_prob_self_cond=0.9):
        super().__init__()
        self.model = model
        self.train_prob_self_cond = train_prob_self_cond
        self.last_latents = None

    def forward(self, img):
        times = torch.rand(img.shape[0])
        noise = torch.randn_like(img)
        alpha = torch.cos(times * math.pi / 2)[:, None]
        noised_img = alpha * img + (1 - alpha ** 2).sqrt() * noise
        self_latents = None
        if self.last_latents is not None and torch.rand(()) < self.train_prob_self_cond:
            self_latents = self.last_latents
        pred, latents = self.model(noised_img, times, latent_self_cond=self_latents)
        self.last_latents = latents
        return F.mse_loss(pred, img)


class Trainer:
    def __init__(self, diffusion, data, lr=1e-3):
        self.diffusion, self.data = diffusion, data
        self.opt = torch.optim.Adam(diffusion.parameters(), lr=lr)

    def train(self, num_steps=10):
        for step in range(num_steps):
            loss = self.diffusion(self.data[torch.randint(0, len(self.data), (16,))])
            self.opt.zero_grad()
            loss.backward()  # expect: raises frees
            self.opt.step()
            if step % 5 == 0:
                print(f"step {step} loss {loss.item():.4f}")


Trainer(GaussianDiffusion(RIN()), torch.randn(256, DIM)).train()
