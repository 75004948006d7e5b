# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
LATENT, IMG = 16, 8


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(LATENT, 32 * 4 * 4)
        self.conv = nn.Conv2d(32, 3, 3, padding=1)

    def forward(self, z):
        x = F.leaky_relu(self.fc(z).view(-1, 32, 4, 4), 0.2)
        return torch.tanh(self.conv(F.interpolate(x, scale_factor=2)))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, 64)
        self.decision = nn.Linear(64, 1)

    def forward(self, x, getFeature=False):
        x = F.leaky_relu(F.avg_pool2d(self.conv(x), 2), 0.2)
        feature = F.leaky_relu(self.fc(x.flatten(1)), 0.2)  # expect: forward
        out = self.decision(feature)
        return (out, feature) if getFeature else out


def GDPPLoss(phiFake, phiReal, backward=True):
    def compute_diversity(phi):
        phi = F.normalize(phi, p=2, dim=1)
        return torch.linalg.eigh(phi @ phi.t())

    fakeEigVals, fakeEigVecs = compute_diversity(phiFake)
    realEigVals, realEigVecs = compute_diversity(phiReal)
    eigValsLoss = F.mse_loss(fakeEigVals / realEigVals.max(), realEigVals / realEigVals.max())
    eigVecsLoss = -torch.sum(F.cosine_similarity(fakeEigVecs, realEigVecs, dim=0) * realEigVals / realEigVals.sum())
    loss = eigValsLoss + eigVecsLoss
    if backward:
        loss.backward()  # expect: raises
    return loss.item()


class BaseGAN:
    def __init__(self):
        self.netG, self.netD = Generator(), Discriminator()
        self.optimizerG = torch.optim.Adam(self.netG.parameters(), lr=1e-3, betas=(0.0, 0.99))
        self.optimizerD = torch.optim.Adam(self.netD.parameters(), lr=1e-3, betas=(0.0, 0.99))

    def optimizeParameters(self, input_batch):
        allLosses = {}
        n = input_batch.size(0)
        self.optimizerD.zero_grad()
        predRealD = self.netD(input_batch)
        predFakeD = self.netD(self.netG(torch.randn(n, LATENT)).detach())
        lossD = F.softplus(-predRealD).mean() + F.softplus(predFakeD).mean()
        lossD.backward()
        self.optimizerD.step()
        allLosses["lossD"] = lossD.item()

        self.optimizerG.zero_grad()
        self.optimizerD.zero_grad()
        predFakeG = self.netG(torch.randn(n, LATENT))
        predFakeD, phiGFake = self.netD(predFakeG, True)  # expect: forward
        lossGFake = F.softplus(-predFakeD).mean()
        lossGFake.backward()  # expect: frees
        _, phiDReal = self.netD(input_batch, True)
        allLosses["lossG_GDPP"] = GDPPLoss(phiGFake, phiDReal.detach(), backward=True)
        self.optimizerG.step()
        allLosses["lossG"] = lossGFake.item()
        return allLosses


gan = BaseGAN()
for it in range(3):
    losses = gan.optimizeParameters(torch.rand(12, 3, IMG, IMG) * 2 - 1)
    print(it, {k: round(v, 4) for k, v in losses.items()})
