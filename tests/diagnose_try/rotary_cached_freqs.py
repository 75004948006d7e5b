# Source: https://github.com/lucidrains/rotary-embedding-torch/issues/18
# Shape: a rotary embedding with learned frequencies caches its computed table on the module; step 2 reads the cache.
import torch
import torch.nn as nn


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, learned_freq=True):
        super().__init__()
        inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.freqs = nn.Parameter(inv, requires_grad=learned_freq)
        self.cached_freqs = None

    def forward(self, seq_len):
        if self.cached_freqs is not None and seq_len <= self.cached_freqs.shape[0]:
            return self.cached_freqs[:seq_len]
        t = torch.arange(seq_len).float()
        freqs = torch.einsum("i,f->if", t, self.freqs).repeat_interleave(2, dim=-1)
        self.cached_freqs = freqs
        return freqs


def rotate_half(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.rotary = RotaryEmbedding(dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        freqs = self.rotary(x.shape[1])
        q = q * freqs.cos() + rotate_half(q) * freqs.sin()
        k = k * freqs.cos() + rotate_half(k) * freqs.sin()
        attn = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).softmax(-1)
        return self.out(attn @ v)


torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(50, 16), Attention(16), nn.Linear(16, 50))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    tokens = torch.randint(0, 50, (4, 12))
    logits = model(tokens[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, 50), tokens[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
