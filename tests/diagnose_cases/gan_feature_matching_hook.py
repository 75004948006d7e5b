"""A GAN generator trained with feature matching on discriminator features a forward hook caches.

Rebuilt from the structure of forum and issue reports of feature-matching losses (improved-GAN,
pix2pixHD style): the reader registers a forward hook on one of the discriminator's layers that
stores its output in a dict, reads the real batch's features right after `D(real)` in the
discriminator step, and reuses them after `opt_d.step()` as the target of the generator's
feature-matching loss. The generator's backward runs through `real_feats` into the
discriminator's pass over the real batch, which the discriminator's backward freed. The fix,
as pix2pixHD writes it: the real features are a target, so use `real_feats.detach()` in the
generator's loss. retain_graph=True on the first call would trade this error for the in-place
one, as `opt_d.step()` changes the weights that pass saved (checked by running it); adding the
two losses and calling backward once would train D on the generator's loss.
"""

# expect-cause: shared-forward
# expect-fix: real_feats
# expect-fix: detach
# expect-not-fix: retain_graph=True to the first call
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(
    nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1)
)
cache = {}


def save_features(module, inputs, output):
    cache["features"] = output


D[3].register_forward_hook(save_features)
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
for step in range(3):
    real = torch.randn(32, 2) * 0.3 + torch.tensor([1.0, -1.0])
    fake = G(torch.randn(32, 8))
    d_real = D(real)  # expect: forward
    real_feats = cache["features"]
    d_fake = D(fake.detach())
    loss_d = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
    opt_d.zero_grad()
    loss_d.backward()  # expect: frees
    opt_d.step()
    d_gen = D(fake)
    fake_feats = cache["features"]
    matching = nn.functional.mse_loss(fake_feats.mean(dim=0), real_feats.mean(dim=0))
    loss_g = bce(d_gen, torch.ones_like(d_gen)) + 10.0 * matching
    opt_g.zero_grad()
    loss_g.backward()  # expect: raises
    opt_g.step()
    print(f"step {step}: d {loss_d.item():.4f} g {loss_g.item():.4f}")
