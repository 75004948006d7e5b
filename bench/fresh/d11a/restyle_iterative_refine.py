# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
N_STYLES, STYLE_DIM, RES = 4, 32, 16


class TinyStyleGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.const = nn.Parameter(torch.randn(1, 16, 4, 4))
        self.mods = nn.ModuleList([nn.Linear(STYLE_DIM, 16) for _ in range(N_STYLES)])
        self.convs = nn.ModuleList([nn.Conv2d(16, 16, 3, padding=1) for _ in range(N_STYLES - 1)])
        self.to_rgb = nn.Conv2d(16, 3, 1)

    def forward(self, codes):
        x = self.const.expand(codes.shape[0], -1, -1, -1)
        for i in range(N_STYLES - 1):
            x = x * (1 + self.mods[i](codes[:, i])[:, :, None, None])
            x = F.leaky_relu(self.convs[i](F.interpolate(x, scale_factor=2) if i < 2 else x), 0.2)
        x = x * (1 + self.mods[-1](codes[:, -1])[:, :, None, None])
        return torch.tanh(self.to_rgb(x))  # expect: forward


class ResidualEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(6, 32, 3, stride=2, padding=1), nn.PReLU(32),
                                  nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.PReLU(32), nn.AdaptiveAvgPool2d(1))
        self.styles = nn.Linear(32, N_STYLES * STYLE_DIM)

    def forward(self, x):
        return self.styles(self.body(x).flatten(1)).view(-1, N_STYLES, STYLE_DIM)


class pSp(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.decoder = ResidualEncoder(), TinyStyleGenerator()
        self.decoder.requires_grad_(False)
        self.register_buffer("latent_avg", torch.zeros(N_STYLES, STYLE_DIM))

    def forward(self, x, latent=None, return_latents=False):
        codes = self.encoder(x)
        codes = codes + (self.latent_avg.unsqueeze(0) if latent is None else latent)
        images = self.decoder(codes)
        return (images, codes) if return_latents else images


class Coach:
    def __init__(self, n_iters_per_batch=3):
        self.net = pSp()
        self.n_iters_per_batch = n_iters_per_batch
        self.optimizer = torch.optim.Adam(self.net.encoder.parameters(), lr=1e-4)
        with torch.no_grad():
            self.avg_image = self.net.decoder(self.net.latent_avg.unsqueeze(0))[0]

    def perform_train_iteration_on_batch(self, x, y):
        y_hat, latent = None, None
        for iter in range(self.n_iters_per_batch):
            if iter == 0:
                x_input = torch.cat([x, self.avg_image.unsqueeze(0).repeat(x.shape[0], 1, 1, 1)], dim=1)
            else:
                x_input = torch.cat([x, y_hat], dim=1)
            y_hat, latent = self.net.forward(x_input, latent=latent, return_latents=True)  # expect: forward
            loss = F.mse_loss(y_hat, y) + 0.1 * F.l1_loss(y_hat, y)
            loss.backward()  # expect: raises frees
        return loss

    def train(self, batches):
        for step, (x, y) in enumerate(batches):
            self.optimizer.zero_grad()
            loss = self.perform_train_iteration_on_batch(x, y)
            self.optimizer.step()
            print(f"step {step} loss {loss.item():.4f}")


images = [torch.rand(4, 3, RES, RES) * 2 - 1 for _ in range(3)]
Coach().train([(img, img) for img in images])
