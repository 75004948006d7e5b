# expect-cause: shared-forward
import torch
import torch.nn as nn

torch.manual_seed(0)


class GANLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, pred, target_is_real):
        return self.loss(pred, torch.full_like(pred, 1.0 if target_is_real else 0.0))


class ShiftNetModel:
    def __init__(self, gan_type="re_avg_gan", lambda_A=100.0):
        self.gan_type, self.lambda_A = gan_type, lambda_A
        self.netG = nn.Sequential(nn.Conv2d(4, 16, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 3, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1), nn.LeakyReLU(0.2),
                                  nn.Conv2d(16, 32, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(32, 1, 3, padding=1))
        self.criterionGAN, self.criterionL1 = GANLoss(), nn.L1Loss()
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))

    def set_input(self, real_B, mask):
        self.real_B, self.mask = real_B, mask
        self.real_A = real_B * (1 - mask)

    def forward(self):
        self.fake_B = self.netG(torch.cat([self.real_A, self.mask], 1))

    def backward_D(self):
        self.pred_fake = self.netD(self.fake_B.detach())
        self.pred_real = self.netD(self.real_B)  # expect: forward
        if self.gan_type == "re_avg_gan":
            self.loss_D = (self.criterionGAN(self.pred_real - torch.mean(self.pred_fake), True)
                           + self.criterionGAN(self.pred_fake - torch.mean(self.pred_real), False)) / 2
        self.loss_D.backward()  # expect: frees

    def backward_G(self):
        pred_fake = self.netD(self.fake_B)
        if self.gan_type == "re_avg_gan":
            pred_real = self.pred_real
            self.loss_G_GAN = (self.criterionGAN(pred_real - torch.mean(pred_fake), False)
                               + self.criterionGAN(pred_fake - torch.mean(pred_real), True)) / 2
        self.loss_G_L1 = self.criterionL1(self.fake_B, self.real_B) * self.lambda_A
        self.loss_G = self.loss_G_GAN + self.loss_G_L1
        self.loss_G.backward()  # expect: raises

    def optimize_parameters(self):
        self.forward()
        self.optimizer_D.zero_grad()
        self.backward_D()
        self.optimizer_D.step()
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


model = ShiftNetModel()
for it in range(3):
    real = torch.rand(4, 3, 32, 32) * 2 - 1
    mask = torch.zeros(4, 1, 32, 32)
    mask[:, :, 8:24, 8:24] = 1
    model.set_input(real, mask)
    model.optimize_parameters()
    print(f"iter {it} D {model.loss_D.item():.3f} G {model.loss_G.item():.3f}")
