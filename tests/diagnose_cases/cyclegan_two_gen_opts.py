"""CycleGAN whose two generators get one optimizer each, stepped one after the other.

Rebuilt from the structure of issue-tracker questions against CycleGAN implementations ("can I
use two optimizers for G_A and G_B, and step after each generator's loss?"): the translations
and reconstructions are computed once (`fake_B = G_AB(real_A)`, `rec_A = G_BA(fake_B)`, and the
other way round), each generator's loss is its adversarial term plus the cycle-consistency
terms, and the loop runs `loss_G_AB.backward(); opt_G_AB.step()`, then
`loss_G_BA.backward(); opt_G_BA.step()`. Each cycle term runs through both generators, so the
first backward frees the whole translate-and-reconstruct graph and the second fails in it.
The fix, as the reference implementation has it (the cycle loss must update both generators
together): add the two losses, call backward once and step both optimizers (or use one
optimizer over both generators). retain_graph=True on the first call would trade this error
for the in-place one: `opt_G_AB.step()` changes G_AB's weights that graph saved. The
discriminators' step scores detached fakes and is not part of the error.
"""

# expect-cause: shared-forward
# expect-fix: once
# expect-not-fix: retain_graph=True
import torch
from torch import nn

torch.manual_seed(0)


def generator():
    return nn.Sequential(nn.Linear(6, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 6))


def discriminator():
    return nn.Sequential(nn.Linear(6, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))


G_AB, G_BA, D_A, D_B = generator(), generator(), discriminator(), discriminator()
opt_G_AB = torch.optim.Adam(G_AB.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_G_BA = torch.optim.Adam(G_BA.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_D = torch.optim.Adam([*D_A.parameters(), *D_B.parameters()], lr=2e-4, betas=(0.5, 0.999))
mse, l1, lambda_cyc = nn.MSELoss(), nn.L1Loss(), 10.0

for step in range(3):
    real_A, real_B = torch.randn(8, 6), torch.randn(8, 6) + 1.0
    fake_B = G_AB(real_A)
    rec_A = G_BA(fake_B)
    fake_A = G_BA(real_B)
    rec_B = G_AB(fake_A)
    cycle = l1(rec_A, real_A) + l1(rec_B, real_B)  # expect: forward
    pred_B, pred_A = D_B(fake_B), D_A(fake_A)
    loss_G_AB = mse(pred_B, torch.ones_like(pred_B)) + lambda_cyc * cycle
    loss_G_BA = mse(pred_A, torch.ones_like(pred_A)) + lambda_cyc * cycle
    opt_G_AB.zero_grad()
    loss_G_AB.backward()  # expect: frees
    opt_G_AB.step()
    opt_G_BA.zero_grad()
    loss_G_BA.backward()  # expect: raises
    opt_G_BA.step()

    opt_D.zero_grad()
    loss_D = 0.0
    for D, real, fake in ((D_A, real_A, fake_A), (D_B, real_B, fake_B)):
        pred_real, pred_fake = D(real), D(fake.detach())
        loss_D = loss_D + mse(pred_real, torch.ones_like(pred_real))
        loss_D = loss_D + mse(pred_fake, torch.zeros_like(pred_fake))
    (0.5 * loss_D).backward()
    opt_D.step()
    print(f"step {step}: G_AB {loss_G_AB.item():.4f} G_BA {loss_G_BA.item():.4f}")
