"""A GAN in a Lightning-style module with manual optimization, reusing D(fake) for G's loss.

Rebuilt from the structure of issue-tracker reports against Lightning GAN examples with
`automatic_optimization = False`: `training_step` computes the fake batch and the
discriminator's score on it once, uses that score in the discriminator's loss (fake not
detached) and again in the generator's loss, and calls `self.manual_backward(...)` for each.
The fix: score `fake.detach()` for the discriminator's loss and score `fake` again for the
generator's loss.
"""

# expect-cause: shared-forward
# expect-fix: detach
import torch
from torch import nn

torch.manual_seed(0)


class ManualModule(nn.Module):
    """The part of a LightningModule this script uses."""

    def manual_backward(self, loss):
        loss.backward()  # expect: raises frees

    def optimizers(self):
        return self._optimizers


class GAN(ManualModule):
    def __init__(self):
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
        self.discriminator = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
        self._optimizers = (
            torch.optim.Adam(self.generator.parameters(), lr=2e-4, betas=(0.5, 0.999)),
            torch.optim.Adam(self.discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999)),
        )

    def training_step(self, real):
        opt_g, opt_d = self.optimizers()
        fake = self.generator(torch.randn(len(real), 8))
        d_fake = self.discriminator(fake)  # expect: forward
        d_real = self.discriminator(real)
        ones, zeros = torch.ones_like(d_real), torch.zeros_like(d_real)
        bce = nn.functional.binary_cross_entropy_with_logits

        d_loss = (bce(d_real, ones) + bce(d_fake, zeros)) / 2
        opt_d.zero_grad()
        self.manual_backward(d_loss)  # expect: caller-frees
        opt_d.step()

        g_loss = bce(d_fake, ones)
        opt_g.zero_grad()
        self.manual_backward(g_loss)  # expect: caller-raises
        opt_g.step()
        return d_loss.item(), g_loss.item()


model = GAN()
for _batch in range(3):
    print(model.training_step(torch.randn(16, 2) * 0.5 + 1.0))
