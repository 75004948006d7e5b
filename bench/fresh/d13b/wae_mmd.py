# expect-cause: shared-forward
import torch
import torch.nn as nn

torch.manual_seed(0)
n_z, batch_size, sigma = 8, 32, 1.0


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(784, 128), nn.ReLU(True), nn.Linear(128, 64), nn.ReLU(True))
        self.fc = nn.Linear(64, n_z)

    def forward(self, x):
        return self.fc(self.main(x))  # expect: forward


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(n_z, 64), nn.ReLU(True), nn.Linear(64, 128), nn.ReLU(True),
                                  nn.Linear(128, 784), nn.Sigmoid())

    def forward(self, z):
        return self.main(z)


def imq_kernel(X, Y, h_dim):
    batch = X.size(0)
    norms_x = X.pow(2).sum(1, keepdim=True)
    prods_x = torch.mm(X, X.t())
    dists_x = norms_x + norms_x.t() - 2 * prods_x
    norms_y = Y.pow(2).sum(1, keepdim=True)
    dists_c = norms_x + norms_y.t() - 2 * torch.mm(X, Y.t())
    dists_y = norms_y + norms_y.t() - 2 * torch.mm(Y, Y.t())
    stats = 0
    for scale in [.1, .2, .5, 1., 2., 5., 10.]:
        C = 2 * h_dim * 1.0 * scale
        res1 = C / (C + dists_x) + C / (C + dists_y)
        res1 = (1 - torch.eye(batch)) * res1
        stats = stats + res1.sum() / (batch - 1) - (C / (C + dists_c)).sum() * 2.0 / batch
    return stats


encoder, decoder = Encoder(), Decoder()
criterion = nn.MSELoss()
enc_optim = torch.optim.Adam(encoder.parameters(), lr=1e-3)
dec_optim = torch.optim.Adam(decoder.parameters(), lr=1e-3)
train_data = torch.rand(4 * batch_size, 784)

for epoch in range(2):
    for step in range(4):
        images = train_data[step * batch_size:(step + 1) * batch_size]
        enc_optim.zero_grad()
        dec_optim.zero_grad()
        z_tilde = encoder(images)
        x_recon = decoder(z_tilde)
        recon_loss = criterion(x_recon, images)
        recon_loss.backward()  # expect: frees

        z = torch.randn(images.size(0), n_z) * sigma
        mmd_loss = imq_kernel(z_tilde, z, h_dim=n_z)
        mmd_loss = mmd_loss / batch_size
        mmd_loss.mean().backward(retain_graph=True)  # expect: raises
        enc_optim.step()
        dec_optim.step()
        print(f"epoch {epoch} step {step} recon {recon_loss.item():.4f} mmd {mmd_loss.item():.5f}")
