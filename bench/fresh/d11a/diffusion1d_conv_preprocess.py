# expect-cause: carried-state
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
SEQ_LEN, CHANNELS, TIMESTEPS = 64, 8, 100


class SinusoidalPosEmb(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, t):
        half = self.dim // 2
        freqs = torch.exp(torch.arange(half) * -(math.log(10000) / (half - 1)))
        args = t[:, None].float() * freqs[None]
        return torch.cat([args.sin(), args.cos()], dim=-1)


class Unet1D(nn.Module):
    def __init__(self, dim, channels):
        super().__init__()
        self.time_mlp = nn.Sequential(SinusoidalPosEmb(dim), nn.Linear(dim, dim), nn.GELU())
        self.down = nn.Conv1d(channels, dim, 3, padding=1)
        self.mid = nn.Conv1d(dim, dim, 3, padding=1)
        self.up = nn.Conv1d(dim, channels, 3, padding=1)

    def forward(self, x, t):
        h = F.gelu(self.down(x)) + self.time_mlp(t)[:, :, None]
        return self.up(F.gelu(self.mid(h)))


class GaussianDiffusion1D(nn.Module):
    def __init__(self, model, timesteps):
        super().__init__()
        self.model, self.num_timesteps = model, timesteps
        alphas_cumprod = torch.cumprod(1.0 - torch.linspace(1e-4, 0.02, timesteps), dim=0)
        self.register_buffer("sqrt_alphas_cumprod", alphas_cumprod.sqrt())
        self.register_buffer("sqrt_one_minus_alphas_cumprod", (1.0 - alphas_cumprod).sqrt())

    def forward(self, x_start):
        t = torch.randint(0, self.num_timesteps, (x_start.shape[0],))
        noise = torch.randn_like(x_start)
        x_t = self.sqrt_alphas_cumprod[t, None, None] * x_start + self.sqrt_one_minus_alphas_cumprod[t, None, None] * noise
        return F.mse_loss(self.model(x_t, t), noise)


class SignalModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_conv = nn.Conv1d(1, CHANNELS, kernel_size=1)
        self.diffusion = GaussianDiffusion1D(Unet1D(32, CHANNELS), TIMESTEPS)


class Trainer1D:
    def __init__(self, model, dataset, train_batch_size=16, train_lr=1e-3, train_num_steps=6):
        self.model, self.dataset = model, dataset
        self.batch_size, self.train_num_steps = train_batch_size, train_num_steps
        self.opt = torch.optim.Adam(model.parameters(), lr=train_lr)

    def cycle(self):
        while True:
            for i in torch.randperm(len(self.dataset)).split(self.batch_size):
                yield self.dataset[i]

    def train(self):
        dl = self.cycle()
        for step in range(self.train_num_steps):
            data = next(dl)
            loss = self.model.diffusion(data)
            loss.backward()  # expect: raises frees
            self.opt.step()
            self.opt.zero_grad()
            print(f"step {step} loss {loss.item():.4f}")


raw_signals = torch.sin(torch.linspace(0, 12, SEQ_LEN) * torch.rand(64, 1, 1) * 3)
model = SignalModel()
training_seq = model.in_conv(raw_signals)  # expect: forward
trainer = Trainer1D(model, training_seq)
trainer.train()
