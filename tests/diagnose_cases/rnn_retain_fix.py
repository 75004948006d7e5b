"""An RNN tagger whose carried hidden state was "fixed" with retain_graph=True; the next step fails."""

# expect-cause: inplace-after-retain
# expect-fix: `h`
# expect-fix: detach
# expect-not-fix: `out = out.detach()`
import torch
from torch import nn

torch.manual_seed(0)
rnn = nn.RNN(8, 16, batch_first=True)
tagger = nn.Linear(16, 4)
opt = torch.optim.SGD(list(rnn.parameters()) + list(tagger.parameters()), lr=0.1)
h = torch.zeros(1, 5, 16)
for step in range(3):
    x, tags = torch.randn(5, 6, 8), torch.randint(0, 4, (5, 6))
    out, h = rnn(x, h)  # expect: forward
    loss = nn.functional.cross_entropy(tagger(out).reshape(-1, 4), tags.reshape(-1))
    opt.zero_grad()
    loss.backward(retain_graph=True)  # expect: kept raises
    opt.step()  # expect: changed
    print(f"step {step}: {loss.item():.4f}")
