# https://github.com/zhanghang1989/PyTorch-Encoding/issues/76
# Reentrant gradient checkpointing of attention blocks that close over a relative-position bias built outside them;
# deep supervision: the auxiliary loss backward retains the graph, then the main loss backward.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x, bias):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = torch.softmax(q @ k.transpose(-1, -2) / q.size(-1) ** 0.5 + bias, dim=-1)
        x = x + att @ v
        return x + self.ff(x)


class Encoder(nn.Module):
    def __init__(self, d=16, n_tok=8, depth=2, n_cls=3):
        super().__init__()
        self.embed = nn.Linear(d, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.rel_table = nn.Embedding(2 * n_tok - 1, 1)
        idx = torch.arange(n_tok)
        self.register_buffer("rel_idx", idx[None, :] - idx[:, None] + n_tok - 1)
        self.aux_head = nn.Linear(d, n_cls)
        self.head = nn.Linear(d, n_cls)

    def forward(self, x):
        bias = 16 * torch.sigmoid(
            self.rel_table(self.rel_idx).squeeze(-1)
        )  # Swin-v2 style bounded bias
        x = self.embed(x)
        outs = []
        for blk in self.blocks:
            x = checkpoint(lambda h, blk=blk: blk(h, bias), x, use_reentrant=True)
            outs.append(x)
        return self.aux_head(outs[0].mean(1)), self.head(outs[-1].mean(1))


model = Encoder()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    x, y = torch.randn(4, 8, 16), torch.randint(0, 3, (4,))
    aux_logits, logits = model(x)
    aux_loss = 0.4 * F.cross_entropy(aux_logits, y)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    aux_loss.backward(retain_graph=True)
    loss.backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.4f} aux {aux_loss.item():.4f}")
