"""A character-level LSTM trained with truncated BPTT that carries its (h, c) state undetached.

Rebuilt from the structure of forum reports of language-model training loops: the hidden
state returned by the LSTM is fed to the next chunk as it is, because the script's
`repackage` step was written for a GRU's single tensor and is skipped for tuples. Both h and
c hold the previous chunk's graph. The fix: detach both, `hidden = tuple(s.detach() for s in
hidden)`.
"""

# expect-cause: carried-state
# expect-fix: detach
# expect-fix: both
import torch
from torch import nn

torch.manual_seed(0)


class CharLM(nn.Module):
    def __init__(self, vocab=30, hidden=24):
        super().__init__()
        self.embed = nn.Embedding(vocab, 12)
        self.rnn = nn.LSTM(12, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, chars, hidden):
        output, hidden = self.rnn(self.embed(chars), hidden)  # expect: forward
        return self.out(output), hidden


def repackage(hidden):
    if isinstance(hidden, torch.Tensor):
        return hidden.detach()
    return hidden


model = CharLM()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
text = torch.randint(0, 30, (3, 61))
hidden = None
for start in range(0, 60, 12):
    chars, targets = text[:, start : start + 12], text[:, start + 1 : start + 13]
    hidden = repackage(hidden)
    logits, hidden = model(chars, hidden)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 30), targets.reshape(-1))
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"chunk at {start}: {loss.item():.6f}")
