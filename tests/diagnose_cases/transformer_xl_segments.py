"""A segment-recurrent Transformer LM that carries its memory across segments with its graph.

Rebuilt from the structure of issue and forum reports of Transformer-XL / recurrent-memory
reimplementations: each segment is encoded by an nn.TransformerEncoderLayer over the previous
segment's hidden states concatenated in front of its own, and those states are kept as the
memory for the next segment. The paper stops the gradient at the memory (`SG(.)`); the reader's
version keeps `memory = hidden[:, -mem_len:]` as it is, so the second segment's backward runs
into the first segment's encoder-layer graph, which the first backward freed. The fix: keep the
memory detached, `memory = hidden[:, -mem_len:].detach()`.
"""

# expect-cause: carried-state
# expect-fix: memory
# expect-fix: detach
import torch
from torch import nn

torch.manual_seed(0)


class SegmentLM(nn.Module):
    def __init__(self, vocab=50, d_model=32, mem_len=6):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, 64, d_model))
        self.layer = nn.TransformerEncoderLayer(d_model, 4, 64, dropout=0.1, batch_first=True)
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, vocab)
        self.mem_len = mem_len

    def forward(self, tokens, memory):
        x = self.embed(tokens)
        if memory is not None:
            x = torch.cat([memory, x], dim=1)
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(1))
        hidden = self.layer(x + self.pos[:, : x.size(1)], src_mask=mask)  # expect: forward
        memory = hidden[:, -self.mem_len :]
        return self.out(self.norm(hidden[:, -tokens.size(1) :])), memory


model = SegmentLM()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
stream = torch.randint(0, 50, (2, 61))
memory = None
for start in range(0, 48, 12):
    tokens, targets = stream[:, start : start + 12], stream[:, start + 1 : start + 13]
    logits, memory = model(tokens, memory)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 50), targets.reshape(-1))
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"segment {start}: {loss.item():.4f}")
