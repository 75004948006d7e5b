"""An RNN with a spectral-normalised recurrent kernel, trained inside one parametrize.cached().

Rebuilt from the structure of forum reports of parametrizations (torch.nn.utils.parametrizations
.spectral_norm, torch 2.x API) on a recurrent weight: the docs advise `parametrize.cached()` when
a parametrized weight is used many times in one forward, as an unrolled RNN's kernel is, and the
reader wrapped the whole training loop in it. The normalised weight is then computed once, at the
first `self.rec(h)` of the first step, and every later step reuses that tensor: its graph (the
division by the spectral norm) was freed by the first backward, and it no longer follows the
optimizer's updates either. The fix: enter `parametrize.cached()` inside the loop, around one
step's forward pass, so each step computes the weight afresh. Detaching the weight would stop
the recurrent kernel from training.
"""

# expect-cause: carried-state
# expect-fix: cached
# expect-not-fix: detach
import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import spectral_norm

torch.manual_seed(0)


class StableRNN(nn.Module):
    def __init__(self, features=3, hidden=16):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.rec = spectral_norm(nn.Linear(hidden, hidden, bias=False))
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        h = torch.zeros(x.size(0), self.rec.in_features)
        for t in range(x.size(1)):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))  # expect: forward
        return self.out(h)


model = StableRNN()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
with parametrize.cached():
    for step in range(3):
        x = torch.randn(8, 12, 3)
        y = x.sum(dim=(1, 2))[:, None] * 0.1
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        opt.step()
        print(f"step {step}: {loss.item():.5f}")
