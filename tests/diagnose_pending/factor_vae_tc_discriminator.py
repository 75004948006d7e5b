"""FactorVAE: the discriminator's loss reuses D(z) from the VAE step, after the VAE's optimizer stepped.

Rebuilt from the structure of a public FactorVAE implementation (Kim & Mnih 2018) and the
issue reports against it on torch 1.5 and later: the VAE step scores the sampled code with the
total-correlation discriminator, `D_z = D(z)`, adds `gamma * D_z.mean()` to the VAE loss, calls
`vae_loss.backward(retain_graph=True)` and `optim_VAE.step()`; the discriminator's step then
builds its loss from that same `D_z` and from D on permuted codes of a second batch. The
discriminator's backward goes through `D_z` into `z` and the encoder, whose weights
`optim_VAE.step()` has changed in place since: "modified by an inplace operation". (Torch 1.4
and earlier did not check this and computed gradients from the updated weights.) The fix: the
discriminator must score the code as data, `D(z.detach())`, computed again for its loss (and
retain_graph can go). Detaching `D_z` instead, as some try, runs but stops the discriminator
from learning on the joint samples at all.
"""

# expect-cause: inplace-after-retain
# expect-fix: D(z.detach())
# expect-not-fix: D_z.detach()
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
z_dim, gamma = 4, 6.4


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 2 * z_dim))
        self.decoder = nn.Sequential(nn.Linear(z_dim, 64), nn.ReLU(), nn.Linear(64, 24))

    def forward(self, x, no_dec=False):
        mu, logvar = self.encoder(x).chunk(2, dim=1)  # expect: forward
        z = mu + (0.5 * logvar).exp() * torch.randn_like(mu)
        return z if no_dec else (self.decoder(z), mu, logvar, z)


def permute_dims(z):
    return torch.stack([col[torch.randperm(len(col))] for col in z.t()], dim=1)


vae = VAE()
D = nn.Sequential(nn.Linear(z_dim, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))
optim_VAE = torch.optim.Adam(vae.parameters(), lr=1e-4, betas=(0.9, 0.999))
optim_D = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.5, 0.9))
ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)
for it in range(3):
    x_vae, x_disc = torch.rand(16, 24), torch.rand(16, 24)
    x_recon, mu, logvar, z = vae(x_vae)
    recon = F.binary_cross_entropy_with_logits(x_recon, x_vae, reduction="sum") / 16
    kld = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1).mean()
    D_z = D(z)
    vae_loss = recon + kld + gamma * D_z.mean()
    optim_VAE.zero_grad()
    vae_loss.backward(retain_graph=True)  # expect: kept
    optim_VAE.step()  # expect: changed

    z_perm = permute_dims(vae(x_disc, no_dec=True))
    D_z_perm = D(z_perm.detach())
    D_tc_loss = F.binary_cross_entropy_with_logits(
        torch.cat([D_z, D_z_perm]), torch.cat([ones, zeros])
    )
    optim_D.zero_grad()
    D_tc_loss.backward()  # expect: raises
    optim_D.step()
    print(f"iter {it}: vae {vae_loss.item():.4f} D_tc {D_tc_loss.item():.4f}")
