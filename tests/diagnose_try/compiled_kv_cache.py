# Source: https://github.com/meta-llama/llama/pull/304
# Shape: llama-style attention writes keys/values into cache buffers without no_grad; the compiled model runs fwd+bwd twice.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim, max_batch, max_seq):
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.register_buffer("cache_k", torch.zeros(max_batch, max_seq, dim))
        self.register_buffer("cache_v", torch.zeros(max_batch, max_seq, dim))

    def forward(self, x, start_pos):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos : start_pos + seqlen] = xv
        keys = self.cache_k[:bsz, : start_pos + seqlen]
        values = self.cache_v[:bsz, : start_pos + seqlen]
        scores = (xq @ keys.transpose(1, 2)) / xq.shape[-1] ** 0.5
        return self.wo(F.softmax(scores, dim=-1) @ values)


class Transformer(nn.Module):
    def __init__(self, vocab=64, dim=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.attn = Attention(dim, max_batch=4, max_seq=16)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens, start_pos=0):
        h = self.tok(tokens)
        h = h + self.attn(h, start_pos)
        return self.head(h)


torch.manual_seed(0)
model = Transformer()
opt_model = torch.compile(model, backend="aot_eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(2):
    tokens = torch.randint(0, 64, (4, 9))
    logits = opt_model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 64), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
