# expect-cause: carried-state
import math
import torch
import torch.nn as nn

torch.manual_seed(0)
DATA_DIM, LATENT_DIM = 20, 6


class Autoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(DATA_DIM, 32), nn.ReLU(), nn.Linear(32, LATENT_DIM))
        self.decoder = nn.Sequential(nn.Linear(LATENT_DIM, 32), nn.ReLU(), nn.Linear(32, DATA_DIM))


class ActNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.shift = nn.Parameter(torch.zeros(dim))
        self.log_scale = nn.Parameter(torch.zeros(dim))
        self.register_buffer("initialized", torch.tensor(False))

    def forward(self, x):
        if not self.initialized:
            with torch.no_grad():
                self.shift.data = -x.mean(0)
                self.log_scale.data = -torch.log(x.std(0) + 1e-6)
                self.initialized.fill_(True)
        return (x + self.shift) * torch.exp(self.log_scale), self.log_scale.sum().expand(x.shape[0])


class AffineCoupling(nn.Module):
    def __init__(self, dim, flip):
        super().__init__()
        self.flip, self.half = flip, dim // 2
        self.conditioner = nn.Sequential(nn.Linear(self.half, 32), nn.Tanh(), nn.Linear(32, 2 * (dim - self.half)))

    def forward(self, x):
        if self.flip:
            x = x.flip(-1)
        a, b = x[:, :self.half], x[:, self.half:]
        log_s, t = self.conditioner(a).chunk(2, dim=-1)
        log_s = torch.tanh(log_s)
        y = torch.cat([a, b * torch.exp(log_s) + t], dim=-1)
        return (y.flip(-1) if self.flip else y), log_s.sum(-1)


class Flow(nn.Module):
    def __init__(self, dim, n_layers=4):
        super().__init__()
        self.layers = nn.ModuleList()
        for i in range(n_layers):
            self.layers.extend([ActNorm(dim), AffineCoupling(dim, flip=bool(i % 2))])

    def log_prob(self, x):
        log_det = torch.zeros(x.shape[0])
        for layer in self.layers:
            x, ld = layer(x)
            log_det = log_det + ld
        base = -0.5 * (x ** 2).sum(-1) - 0.5 * x.shape[-1] * math.log(2 * math.pi)
        return base + log_det

    def fit(self, x_train, n_epochs=3, lr=1e-3, batch_size=64):
        optimizer = torch.optim.Adam(self.parameters(), lr=lr)
        for epoch in range(n_epochs):
            for idx in torch.randperm(x_train.shape[0]).split(batch_size):
                optimizer.zero_grad()
                train_loss = -self.log_prob(x_train[idx]).mean()
                train_loss.backward()  # expect: raises frees
                optimizer.step()
            print(f"flow epoch {epoch} loss {train_loss.item():.3f}")


x = torch.randn(512, DATA_DIM) @ torch.randn(DATA_DIM, DATA_DIM) * 0.3
ae = Autoencoder()
ae_opt = torch.optim.Adam(ae.parameters(), lr=1e-3)
for step in range(50):
    ae_opt.zero_grad()
    rec = ((ae.decoder(ae.encoder(x)) - x) ** 2).mean()
    rec.backward()
    ae_opt.step()

z = ae.encoder(x)  # expect: forward
flow = Flow(LATENT_DIM)
flow.fit(z)
