# expect-cause: none
import itertools
import torch
import torch.nn as nn
import torch.nn.functional as F

class Generator(nn.Module):
    def __init__(self, n_mels=16):
        super().__init__()
        self.conv_pre = nn.Conv1d(n_mels, 32, 7, padding=3)
        self.ups = nn.ModuleList([nn.ConvTranspose1d(32, 16, 8, 4, padding=2), nn.ConvTranspose1d(16, 8, 8, 4, padding=2)])
        self.conv_post = nn.Conv1d(8, 1, 7, padding=3)

    def forward(self, x):
        x = self.conv_pre(x)
        for up in self.ups:
            x = up(F.leaky_relu(x, 0.1))
        return torch.tanh(self.conv_post(F.leaky_relu(x)))

class SubDiscriminator(nn.Module):
    def __init__(self, period=None):
        super().__init__()
        self.period = period
        conv = (lambda i, o: nn.Conv2d(i, o, (5, 1), (3, 1), padding=(2, 0))) if period else (lambda i, o: nn.Conv1d(i, o, 15, 2, padding=7))
        self.convs = nn.ModuleList([conv(1, 16), conv(16, 32)])
        self.conv_post = conv(32, 1)

    def forward(self, x):
        fmap = []
        if self.period:
            b, c, t = x.shape
            x = F.pad(x, (0, (self.period - t % self.period) % self.period), "reflect")
            x = x.view(b, c, -1, self.period)
        for l in self.convs:
            x = F.leaky_relu(l(x), 0.1)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        return torch.flatten(x, 1, -1), fmap

class MultiDiscriminator(nn.Module):
    def __init__(self, periods):
        super().__init__()
        self.discriminators = nn.ModuleList([SubDiscriminator(p) for p in periods])

    def forward(self, y, y_hat):
        y_d_rs, y_d_gs, fmap_rs, fmap_gs = [], [], [], []
        for d in self.discriminators:
            y_d_r, fmap_r = d(y)
            y_d_g, fmap_g = d(y_hat)
            y_d_rs.append(y_d_r); fmap_rs.append(fmap_r); y_d_gs.append(y_d_g); fmap_gs.append(fmap_g)
        return y_d_rs, y_d_gs, fmap_rs, fmap_gs

def feature_loss(fmap_r, fmap_g):
    return 2 * sum(torch.mean(torch.abs(rl - gl)) for dr, dg in zip(fmap_r, fmap_g) for rl, gl in zip(dr, dg))

def discriminator_loss(disc_real_outputs, disc_generated_outputs):
    return sum(torch.mean((1 - dr) ** 2) + torch.mean(dg ** 2) for dr, dg in zip(disc_real_outputs, disc_generated_outputs))

def generator_loss(disc_outputs):
    return sum(torch.mean((1 - dg) ** 2) for dg in disc_outputs)

def mel_spectrogram(y, n_fft=64, hop_size=16):
    spec = torch.stft(y, n_fft, hop_size, window=torch.hann_window(n_fft), return_complex=True).abs()
    return torch.log(torch.clamp(spec, min=1e-5))

torch.manual_seed(0)
generator, mpd, msd = Generator(), MultiDiscriminator([2]), MultiDiscriminator([None])
optim_g = torch.optim.AdamW(generator.parameters(), 2e-4, betas=(0.8, 0.99))
optim_d = torch.optim.AdamW(itertools.chain(msd.parameters(), mpd.parameters()), 2e-4, betas=(0.8, 0.99))
for steps in range(2):
    x, y = torch.randn(2, 16, 8), torch.rand(2, 1, 128) * 2 - 1
    y_mel = mel_spectrogram(y.squeeze(1))
    y_g_hat = generator(x)
    y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1))
    optim_d.zero_grad()
    y_df_hat_r, y_df_hat_g, _, _ = mpd(y, y_g_hat.detach())
    y_ds_hat_r, y_ds_hat_g, _, _ = msd(y, y_g_hat.detach())
    loss_disc_all = discriminator_loss(y_ds_hat_r, y_ds_hat_g) + discriminator_loss(y_df_hat_r, y_df_hat_g)
    loss_disc_all.backward()
    optim_d.step()
    optim_g.zero_grad()
    loss_mel = F.l1_loss(y_mel, y_g_hat_mel) * 45
    y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = mpd(y, y_g_hat)
    y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = msd(y, y_g_hat)
    loss_gen_all = (generator_loss(y_ds_hat_g) + generator_loss(y_df_hat_g) + feature_loss(fmap_s_r, fmap_s_g)
                    + feature_loss(fmap_f_r, fmap_f_g) + loss_mel)
    loss_gen_all.backward()
    optim_g.step()
    print(steps, loss_gen_all.item(), loss_disc_all.item())
