# expect-cause: shared-forward
import random
import torch
import torch.nn as nn


class ImagePool():
    def __init__(self, pool_size):
        self.pool_size = pool_size
        self.num_imgs = 0
        self.images = []

    def query(self, images):
        return_images = []
        for image in images:
            image = torch.unsqueeze(image, 0)
            if self.num_imgs < self.pool_size:
                self.num_imgs += 1
                self.images.append(image)
                return_images.append(image)
            elif random.uniform(0, 1) > 0.5:
                random_id = random.randint(0, self.pool_size - 1)
                tmp = self.images[random_id].clone()
                self.images[random_id] = image
                return_images.append(tmp)
            else:
                return_images.append(image)
        return torch.cat(return_images, 0)


def small_net(out_act=None):
    layers = [nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1)]
    return nn.Sequential(*(layers + ([out_act] if out_act else [])))


class CycleGANModel:
    def __init__(self):
        self.netG_A, self.netG_B = small_net(nn.Tanh()), small_net(nn.Tanh())
        self.netD_A, self.netD_B = small_net(), small_net()
        self.fake_A_pool, self.fake_B_pool = ImagePool(4), ImagePool(4)
        self.crit_gan, self.crit_cycle = nn.MSELoss(), nn.L1Loss()
        g_params = list(self.netG_A.parameters()) + list(self.netG_B.parameters())
        d_params = list(self.netD_A.parameters()) + list(self.netD_B.parameters())
        self.optimizer_G = torch.optim.Adam(g_params, lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(d_params, lr=2e-4, betas=(0.5, 0.999))

    def forward(self, real_A, real_B):
        self.real_A, self.real_B = real_A, real_B
        self.fake_B = self.netG_A(real_A)  # expect: forward
        self.rec_A = self.netG_B(self.fake_B)
        self.fake_A = self.netG_B(real_B)
        self.rec_B = self.netG_A(self.fake_A)

    def gan_loss(self, pred, is_real):
        return self.crit_gan(pred, torch.full_like(pred, 1.0 if is_real else 0.0))

    def backward_G(self):
        loss_G = self.gan_loss(self.netD_A(self.fake_B), True) + self.gan_loss(self.netD_B(self.fake_A), True)
        loss_G = loss_G + 10 * (self.crit_cycle(self.rec_A, self.real_A) + self.crit_cycle(self.rec_B, self.real_B))
        loss_G.backward()  # expect: frees
        return loss_G

    def backward_D_basic(self, netD, real, fake):
        loss_D = 0.5 * (self.gan_loss(netD(real), True) + self.gan_loss(netD(fake), False))
        loss_D.backward()  # expect: raises
        return loss_D

    def optimize_parameters(self, real_A, real_B):
        self.forward(real_A, real_B)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()
        self.optimizer_D.zero_grad()
        self.backward_D_basic(self.netD_A, self.real_B, self.fake_B_pool.query(self.fake_B))
        self.backward_D_basic(self.netD_B, self.real_A, self.fake_A_pool.query(self.fake_A))
        self.optimizer_D.step()


random.seed(0)
torch.manual_seed(0)
model = CycleGANModel()
for it in range(4):
    model.optimize_parameters(torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16))
    print("iter", it)
