"""A tiny attention decoder that fills a preallocated key/value cache in place, kept across steps.

Rebuilt from the structure of forum reports of decoders trained with their inference-time
cache: the module allocates `self.cache` once in `__init__` (zeros, batch x positions x
(key, value) x width), and forward writes each position's projected key and value into it in
place (`self.cache[:, t] = kv`, a CopySlices node over the cache's previous history) before
attending over it with a causal mask. The cache is never reset, so after the first step it is a
non-leaf whose history runs through the first step's writes; the second step overwrites every
slot, but its backward still walks that chain back to the first step's CopySlices nodes, whose
backward functions that step's backward released. The fix: start each forward from a detached
(or fresh) cache, `self.cache = self.cache.detach()` (or new zeros) at the top of forward.
"""

# expect-cause: carried-state
# expect-fix: self.cache
# expect-fix: detach
import torch
from torch import nn

torch.manual_seed(0)


class CachedDecoder(nn.Module):
    def __init__(self, vocab=20, width=16, batch=4, positions=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.query = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * width)
        self.out = nn.Linear(width, vocab)
        self.cache = torch.zeros(batch, positions, 2, width)
        self.causal = torch.ones(positions, positions).tril().bool()

    def forward(self, tokens):
        x = self.embed(tokens)
        for t in range(tokens.shape[1]):
            kv = self.kv(x[:, t]).view(len(tokens), 2, -1)
            self.cache[:, t] = kv  # expect: forward
        keys, values = self.cache.unbind(dim=2)
        scores = self.query(x) @ keys.transpose(1, 2) / keys.shape[-1] ** 0.5
        scores = scores.masked_fill(~self.causal, float("-inf"))
        return self.out(scores.softmax(dim=-1) @ values)


model = CachedDecoder()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.randint(0, 20, (4, 9))
for step in range(3):
    inputs, targets = data[:, :-1], data[:, 1:]
    logits = model(inputs)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 20), targets.reshape(-1))
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"step {step}: {loss.item():.6f}")
