"""A GAN step whose generator loss reuses the discriminator's score from before opt_d.step().

Written for this suite: the discriminator scores the undetached fake batch once (`d_fake`),
its loss goes back and opt_d steps, and the generator's loss is built from that same score.
The generator's backward needs the discriminator's graph, which the first backward freed.
retain_graph=True on the first call trades this error for torch's in-place one (opt_d.step()
changed the weights that graph saved; checked by running it). What runs and trains both:
score `fake.detach()` in the discriminator's loss and score `fake` again after the step for
the generator's loss. Detaching `d_fake` in the generator's loss would leave it no gradient.
"""

# expect-cause: shared-forward
# expect-fix: d_fake
# expect-fix: again after
# expect-fix: fake.detach()
# expect-not-fix: retain_graph=True to
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4)
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4)
crit = nn.BCEWithLogitsLoss()
for _step in range(3):
    real = torch.randn(16, 2)
    fake = G(torch.randn(16, 8))
    d_fake = D(fake)  # expect: forward
    loss_d = crit(D(real), torch.ones(16, 1)) + crit(d_fake, torch.zeros(16, 1))
    opt_d.zero_grad()
    loss_d.backward()  # expect: frees
    opt_d.step()
    loss_g = crit(d_fake, torch.ones(16, 1))
    opt_g.zero_grad()
    loss_g.backward()  # expect: raises
    opt_g.step()
