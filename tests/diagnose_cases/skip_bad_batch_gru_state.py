"""A GRU tagger that skips a malformed batch (caught shape error), then fails on its carried state.

Rebuilt from the structure of forum reports of training loops that wrap the forward pass in
`try/except RuntimeError` to skip bad batches (the fairseq-style "skip this batch" pattern, with
the exception's message checked so other errors still raise). One batch is padded to the wrong
length, and the head's nn.Linear, inside an nn.Sequential, raises "mat1 and mat2 shapes cannot
be multiplied" after the GRU and the Flatten already ran; the loop skips it and goes on. The
real bug is elsewhere: the GRU's hidden state is passed from batch to batch undetached, so the
next good batch's backward runs into the graph of the batch before, which its backward freed.
The fix: `hidden = hidden.detach()` before each forward.
"""

# expect-cause: carried-state
# expect-fix: hidden
# expect-fix: detach
import torch
from torch import nn

torch.manual_seed(0)


class Tagger(nn.Module):
    def __init__(self, vocab=30, seq=6, size=12, classes=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, size)
        self.gru = nn.GRU(size, size, batch_first=True)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(seq * size, 32), nn.ReLU())
        self.out = nn.Linear(32, classes)

    def forward(self, tokens, hidden):
        out, hidden = self.gru(self.embed(tokens), hidden)  # expect: forward
        return self.out(self.head(out)), hidden


model = Tagger()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
batches = [torch.randint(0, 30, (4, 8 if i == 1 else 6)) for i in range(4)]
hidden, skipped = torch.zeros(1, 4, 12), 0
for i, tokens in enumerate(batches):
    labels = torch.randint(0, 4, (4,))
    try:
        logits, hidden = model(tokens, hidden)
    except RuntimeError as exc:
        if "shapes cannot be multiplied" not in str(exc):
            raise
        skipped += 1
        print(f"batch {i}: skipped ({skipped} so far)")
        continue
    loss = nn.functional.cross_entropy(logits, labels)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"batch {i}: {loss.item():.4f}")
