# StyleMapGAN generator step: adversarial loss and stylecode reconstruction loss backpropagated separately
# (naver-ai/StyleMapGAN issue #16, train.py mode "G")
# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
latent_dim, batch = 16, 4


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.mapping = nn.Sequential(nn.Linear(latent_dim, 64), nn.LeakyReLU(0.2), nn.Linear(64, 4 * 8 * 8))
        self.decoder = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(4, 16, 3, padding=1), nn.LeakyReLU(0.2),
                                     nn.Conv2d(16, 3, 3, padding=1), nn.Tanh())

    def forward(self, z, return_stylecode=False):
        stylecode = self.mapping(z).view(-1, 4, 8, 8)
        fake_img = self.decoder(stylecode)  # expect: forward
        return (fake_img, stylecode) if return_stylecode else fake_img


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = Generator()
        self.encoder = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(16, 4, 4, 2, 1))
        self.discriminator = nn.Sequential(nn.Conv2d(3, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(16 * 8 * 8, 1))

    def forward(self, real_img, mode):
        if mode == "G":
            z = torch.randn(batch, latent_dim)
            fake_img, stylecode = self.generator(z, return_stylecode=True)
            adv_loss = F.softplus(-self.discriminator(fake_img)).mean()
            fake_stylecode = self.encoder(fake_img)
            w_rec_loss = F.mse_loss(stylecode, fake_stylecode)
            return adv_loss, w_rec_loss, stylecode
        elif mode == "D":
            fake_img = self.generator(torch.randn(batch, latent_dim)).detach()
            return (F.softplus(self.discriminator(fake_img)) + F.softplus(-self.discriminator(real_img))).mean()


model = Model()
g_optim = torch.optim.Adam(model.generator.parameters(), lr=2e-3, betas=(0.0, 0.99))
e_optim = torch.optim.Adam(model.encoder.parameters(), lr=2e-3, betas=(0.0, 0.99))
d_optim = torch.optim.Adam(model.discriminator.parameters(), lr=2e-3, betas=(0.0, 0.99))
lambda_adv_loss, lambda_w_rec_loss = 1.0, 1.0
for idx in range(3):
    real_img = torch.rand(batch, 3, 16, 16) * 2 - 1
    d_loss = model(real_img, "D")
    d_optim.zero_grad()
    d_loss.backward()
    d_optim.step()

    adv_loss, w_rec_loss, stylecode = model(None, "G")
    g_loss = adv_loss * lambda_adv_loss
    g_optim.zero_grad()
    e_optim.zero_grad()
    g_loss.backward()  # expect: frees
    (w_rec_loss * lambda_w_rec_loss).backward()  # expect: raises
    g_optim.step()
    e_optim.step()
    print(idx, d_loss.item(), g_loss.item(), w_rec_loss.item())
