# expect-cause: carried-state
import math
from dataclasses import dataclass
import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelArgs:
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    vocab_size: int = 100
    max_batch_size: int = 4
    max_seq_len: int = 32


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.head_dim = args.n_heads, args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)
        self.cache_k = torch.zeros(args.max_batch_size, args.max_seq_len, self.n_heads, self.head_dim)
        self.cache_v = torch.zeros(args.max_batch_size, args.max_seq_len, self.n_heads, self.head_dim)

    def forward(self, x, start_pos, mask):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        self.cache_k = self.cache_k.to(xq)
        self.cache_v = self.cache_v.to(xq)
        self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv  # expect: forward
        keys = self.cache_k[:bsz, : start_pos + seqlen].transpose(1, 2)
        values = self.cache_v[:bsz, : start_pos + seqlen].transpose(1, 2)
        scores = torch.matmul(xq.transpose(1, 2), keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        scores = F.softmax((scores + mask).float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = nn.Sequential(nn.Linear(args.dim, 4 * args.dim), nn.SiLU(), nn.Linear(4 * args.dim, args.dim))
        self.attention_norm, self.ffn_norm = nn.RMSNorm(args.dim), nn.RMSNorm(args.dim)

    def forward(self, x, start_pos, mask):
        h = x + self.attention(self.attention_norm(x), start_pos, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, params: ModelArgs):
        super().__init__()
        self.tok_embeddings = nn.Embedding(params.vocab_size, params.dim)
        self.layers = nn.ModuleList([TransformerBlock(params) for _ in range(params.n_layers)])
        self.norm = nn.RMSNorm(params.dim)
        self.output = nn.Linear(params.dim, params.vocab_size, bias=False)

    def forward(self, tokens, start_pos):
        _bsz, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        mask = torch.full((seqlen, seqlen), float("-inf")).triu(1)
        for layer in self.layers:
            h = layer(h, start_pos, mask)
        return self.output(self.norm(h)).float()


torch.manual_seed(0)
args = ModelArgs()
model = Transformer(args)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step in range(3):
    tokens = torch.randint(0, args.vocab_size, (args.max_batch_size, 17))
    logits = model(tokens[:, :-1], start_pos=0)
    loss = F.cross_entropy(logits.reshape(-1, args.vocab_size), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()  # expect: raises frees
    optimizer.step()
    print(step, loss.item())
