"""A Lightning-style GAN module: the loop calls training_step once per optimizer, fake kept on self.

The generator's step stores its output on the module and backpropagates through it; the
discriminator's step reads `self.fake` undetached after the generator's optimizer stepped, so it
goes back into the generator's freed graph: a tensor carried from one step into the next. The
fix: read it detached in the discriminator's branch (`self.fake.detach()`); detaching it where
it is stored would cut the generator's own loss off from the generator.
"""

# expect-cause: carried-state
# expect-fix: fake.detach()
# expect-fix: where it is used again
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class GAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
        self.D = nn.Sequential(nn.Linear(4, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def configure_optimizers(self):
        return [
            torch.optim.Adam(self.G.parameters(), 2e-4),
            torch.optim.Adam(self.D.parameters(), 2e-4),
        ]

    def training_step(self, real, optimizer_idx):
        bce = nn.functional.binary_cross_entropy_with_logits
        if optimizer_idx == 0:
            self.fake = self.G(torch.randn(real.shape[0], 8))  # expect: forward
            return bce(self.D(self.fake), torch.ones(real.shape[0], 1))
        real_loss = bce(self.D(real), torch.ones(real.shape[0], 1))
        fake_loss = bce(self.D(self.fake), torch.zeros(real.shape[0], 1))
        return (real_loss + fake_loss) / 2


def fit(module, batches):
    optimizers = module.configure_optimizers()
    for real in batches:
        for idx, opt in enumerate(optimizers):
            loss = module.training_step(real, idx)
            opt.zero_grad()
            loss.backward()  # expect: raises frees
            opt.step()
        print(f"loss {loss.item():.4f}")


fit(GAN(), [torch.randn(16, 4) for _ in range(3)])
