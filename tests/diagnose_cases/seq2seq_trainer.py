"""A seq2seq trainer class whose decoder loop uses teacher forcing and keeps self.hidden across batches."""

# expect-cause: carried-state
# expect-fix: hidden
# expect-fix: detach
# expect-not-fix: `_`
import torch
from torch import nn

torch.manual_seed(0)


class Trainer:
    def __init__(self, vocab=20, size=24):
        self.embed = nn.Embedding(vocab, size)
        self.encoder = nn.GRU(size, size, batch_first=True)
        self.cell = nn.GRUCell(size, size)
        self.out = nn.Linear(size, vocab)
        modules = [self.embed, self.encoder, self.cell, self.out]
        self.opt = torch.optim.Adam([p for m in modules for p in m.parameters()], lr=1e-3)
        self.hidden = None

    def train_batch(self, src, tgt):
        _, enc_h = self.encoder(self.embed(src), None if self.hidden is None else self.hidden[None])
        self.hidden = enc_h[0]
        loss = 0
        for t in range(tgt.shape[1] - 1):
            self.hidden = self.cell(self.embed(tgt[:, t]), self.hidden)  # expect: forward
            loss = loss + nn.functional.cross_entropy(self.out(self.hidden), tgt[:, t + 1])
        self.opt.zero_grad()
        loss.backward()  # expect: raises frees
        self.opt.step()
        return loss.item()


trainer = Trainer()
for batch in range(3):
    src, tgt = torch.randint(0, 20, (4, 7)), torch.randint(0, 20, (4, 6))
    print(f"batch {batch}: {trainer.train_batch(src, tgt):.4f}")
