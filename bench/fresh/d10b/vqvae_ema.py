# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F


class Quantize(nn.Module):
    def __init__(self, dim, n_embed, decay=0.99, eps=1e-5):
        super().__init__()
        self.dim, self.n_embed, self.decay, self.eps = dim, n_embed, decay, eps
        embed = torch.randn(dim, n_embed)
        self.register_buffer("embed", embed)
        self.register_buffer("cluster_size", torch.zeros(n_embed))
        self.register_buffer("embed_avg", embed.clone())

    def forward(self, input):
        flatten = input.reshape(-1, self.dim)
        dist = flatten.pow(2).sum(1, keepdim=True) - 2 * flatten @ self.embed + self.embed.pow(2).sum(0, keepdim=True)
        _, embed_ind = (-dist).max(1)
        embed_onehot = F.one_hot(embed_ind, self.n_embed).type(flatten.dtype)
        embed_ind = embed_ind.view(*input.shape[:-1])
        quantize = F.embedding(embed_ind, self.embed.transpose(0, 1))
        if self.training:
            embed_onehot_sum = embed_onehot.sum(0)
            embed_sum = flatten.transpose(0, 1) @ embed_onehot
            self.cluster_size = self.cluster_size * self.decay + embed_onehot_sum * (1 - self.decay)
            self.embed_avg = self.embed_avg * self.decay + embed_sum * (1 - self.decay)
            n = self.cluster_size.sum()
            cluster_size = (self.cluster_size + self.eps) / (n + self.n_embed * self.eps) * n
            self.embed = self.embed_avg / cluster_size.unsqueeze(0)
        diff = (quantize - input).pow(2).mean()
        quantize = input + (quantize - input).detach()
        return quantize, diff, embed_ind


class VQVAE(nn.Module):
    def __init__(self, in_ch=3, ch=16, embed_dim=8, n_embed=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(in_ch, ch, 4, 2, 1), nn.ReLU(), nn.Conv2d(ch, embed_dim, 3, 1, 1))
        self.quantize = Quantize(embed_dim, n_embed)
        self.dec = nn.Sequential(nn.Conv2d(embed_dim, ch, 3, 1, 1), nn.ReLU(), nn.ConvTranspose2d(ch, in_ch, 4, 2, 1))

    def forward(self, x):
        z = self.enc(x).permute(0, 2, 3, 1)  # expect: forward
        quant, diff, _ = self.quantize(z)
        return self.dec(quant.permute(0, 3, 1, 2)), diff


torch.manual_seed(0)
model = VQVAE()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
criterion = nn.MSELoss()
latent_loss_weight = 0.25
for epoch in range(2):
    for i in range(3):
        img = torch.randn(4, 3, 16, 16)
        model.zero_grad()
        out, latent_loss = model(img)
        recon_loss = criterion(out, img)
        loss = recon_loss + latent_loss_weight * latent_loss.mean()
        loss.backward()  # expect: raises frees
        optimizer.step()
        print(f"epoch {epoch} it {i} mse {recon_loss.item():.4f} latent {latent_loss.item():.4f}")
