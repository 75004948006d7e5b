# Source: https://github.com/facebookresearch/higher/issues/14
# Shape: tied-weight autoencoder; encoder under weight_norm (weight recomputed by a forward pre-hook), an auxiliary
# decoder-only loss on alternate steps reads encoder.weight without running the encoder.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import weight_norm


class TiedAE(nn.Module):
    def __init__(self, d_in=20, d_code=6):
        super().__init__()
        self.encoder = weight_norm(nn.Linear(d_in, d_code))
        self.dec_bias = nn.Parameter(torch.zeros(d_in))

    def decode(self, code):
        return F.linear(code, self.encoder.weight.t(), self.dec_bias)

    def forward(self, x):
        return self.decode(torch.tanh(self.encoder(x)))


torch.manual_seed(0)
model = TiedAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(4):
    x = torch.randn(16, 20)
    if step % 2 == 0:
        loss = F.mse_loss(model(x), x)
    else:
        code = torch.randn(16, 6).clamp(-1, 1)
        loss = 0.1 * model.decode(code).pow(2).mean()  # keep decodes of random codes small
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
