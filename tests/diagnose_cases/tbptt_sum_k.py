"""Truncated BPTT that detaches the LSTM state every k chunks but calls backward every chunk.

Rebuilt from the structure of forum reports of TBPTT(k1, k2) attempts: a long sequence is cut
into chunks; the script wants gradients to reach back `k` chunks, so it detaches the (h, c)
state only when `chunk % k == 0`, but it still computes the loss, calls backward and steps the
optimizer after every chunk. The first chunk's backward frees its LSTM graph; the second chunk
starts from that chunk's undetached state, so its backward walks into the freed graph. The fix
that keeps the k-chunk window: sum the chunk losses and call backward (and step) once per
window, when the state is detached. Detaching every chunk also runs and trains every
parameter, but no gradient crosses a chunk boundary (k no longer means anything).
retain_graph=True is a trap: opt.step() between the chunks changes the LSTM weights the kept
graph saved, and torch raises its in-place error instead.
"""

# expect-cause: carried-state
# expect-fix: detach
# expect-fix: once
import torch
from torch import nn

torch.manual_seed(0)


class SequenceModel(nn.Module):
    def __init__(self, features=4, hidden=20):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, features)

    def forward(self, x, state):
        out, state = self.lstm(x, state)  # expect: forward
        return self.head(out), state


model = SequenceModel()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
series = torch.sin(torch.linspace(0, 24, 241)).view(1, -1, 1).repeat(2, 1, 4)
series = series + 0.05 * torch.randn_like(series)
chunk_len, k = 20, 3
for epoch in range(2):
    state = None
    for chunk, start in enumerate(range(0, 240, chunk_len)):
        if state is not None and chunk % k == 0:
            state = tuple(s.detach() for s in state)
        x = series[:, start : start + chunk_len]
        y = series[:, start + 1 : start + chunk_len + 1]
        pred, state = model(x, state)
        loss = nn.functional.mse_loss(pred, y)
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        opt.step()
    print(f"epoch {epoch}: {loss.item():.6f}")
