"""A VAE with KL annealing that smooths the KL term with the previous batch's value (`prev_kl`).

Rebuilt from the structure of forum reports of VAE training loops with a KL warm-up: beta
ramps from 0 to 1 over the first steps, and to damp the KL term's batch-to-batch noise the
script mixes the previous batch's KL into the current one, keeping it on a plain variable at
the end of each step (`prev_kl = kl`). That tensor still holds the previous batch's encoder
graph, which the previous backward freed; the second batch's backward goes back into it. The
fix: keep the previous value without its graph, `prev_kl = kl.detach()` (the current batch's
KL still trains the encoder). retain_graph=True is not a fix: the old graph saved the
encoder's weights, which opt.step() has changed since.
"""

# expect-cause: carried-state
# expect-fix: prev_kl
# expect-fix: detach
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class VAE(nn.Module):
    def __init__(self, d=20, z=4):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 2 * z))
        self.dec = nn.Sequential(nn.Linear(z, 32), nn.ReLU(), nn.Linear(32, d))

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(z), mu, logvar


def kl_divergence(mu, logvar):
    return -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1).mean()  # expect: forward


vae = VAE()
opt = torch.optim.Adam(vae.parameters(), lr=1e-3)
data = torch.rand(128, 20)
warmup_steps, smoothing = 10, 0.5
prev_kl = None
for step in range(8):
    x = data[step * 16 % 128 :][:16]
    recon, mu, logvar = vae(x)
    recon_loss = nn.functional.mse_loss(recon, x, reduction="sum") / len(x)
    kl = kl_divergence(mu, logvar)
    kl_term = kl if prev_kl is None else smoothing * prev_kl + (1 - smoothing) * kl
    beta = min(1.0, step / warmup_steps)
    loss = recon_loss + beta * kl_term
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    prev_kl = kl
    print(f"step {step}: recon {recon_loss.item():.4f} kl {kl.item():.4f} beta {beta:.2f}")
