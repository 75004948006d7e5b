"""A VAE whose reconstruction and KL terms each get their own backward call."""

# expect-cause: shared-forward
# expect-fix: once
import torch
from torch import nn

torch.manual_seed(0)


class VAE(nn.Module):
    def __init__(self, d=16, z=4):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, 32), nn.ReLU())
        self.mu = nn.Linear(32, z)
        self.logvar = nn.Linear(32, z)
        self.dec = nn.Sequential(nn.Linear(z, 32), nn.ReLU(), nn.Linear(32, d))

    def forward(self, x):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)  # expect: forward
        zs = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(zs), mu, logvar


vae = VAE()
opt = torch.optim.Adam(vae.parameters(), lr=1e-3)
for step in range(3):
    x = torch.rand(10, 16)
    recon, mu, logvar = vae(x)
    recon_loss = nn.functional.mse_loss(recon, x, reduction="sum")
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    opt.zero_grad()
    recon_loss.backward()  # expect: frees
    kl.backward()  # expect: raises
    opt.step()
    print(f"step {step}: {recon_loss.item():.3f} {kl.item():.3f}")
