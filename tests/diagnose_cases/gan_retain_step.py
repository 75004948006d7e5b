"""The GAN step "fixed" with retain_graph=True: G's loss reads D's weights after opt_d.step().

Rebuilt from the structure of the many follow-up reports where `retain_graph=True` was added
to the discriminator's backward to silence "backward through the graph a second time", and
the next run fails with "modified by an inplace operation": the generator's loss reuses the
discriminator's output on the undetached fake batch, whose graph saved D's weights, and
`opt_d.step()` changed them in place in between. The fix is the original cause's: score
`fake.detach()` in the discriminator's loss, score `fake` again for the generator's loss, and
drop retain_graph.
"""

# expect-cause: inplace-after-retain
# expect-fix: detach
# expect-not-fix: retain_graph=True
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
criterion = nn.BCEWithLogitsLoss()

for _step in range(3):
    real = torch.randn(16, 2) * 0.5 + 1.0
    fake = G(torch.randn(16, 8))
    d_fake = D(fake)
    d_real = D(real)
    loss_d = criterion(d_real, torch.ones_like(d_real)) + criterion(
        d_fake, torch.zeros_like(d_fake)
    )
    opt_d.zero_grad()
    loss_d.backward(retain_graph=True)  # expect: kept
    opt_d.step()  # expect: changed
    loss_g = criterion(d_fake, torch.ones_like(d_fake))
    opt_g.zero_grad()
    loss_g.backward()  # expect: raises
    opt_g.step()
