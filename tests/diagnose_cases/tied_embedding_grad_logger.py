"""A tied-embedding LM whose gradient logger calls backward on the step's loss a second time.

Rebuilt from the structure of forum reports of language models with weight tying (the output
nn.Linear's weight is the nn.Embedding's, as in Press & Wolf) and a logging helper written to
"get the gradient norms for the dashboard": every `log_every` steps it calls `loss.backward()`
itself and reads each parameter's `.grad`. The training loop has already gone back through the
loss and stepped, so the helper's backward runs into the graph that call freed (and, with
retain_graph, would add the same gradients again). The fix: call backward once; the logger
should read the gradients the loop's backward left (call it before `opt.step()`), without a
backward of its own.
"""

# expect-cause: same-loss-twice
# expect-fix: once
# expect-not-fix: retain_graph=True
# expect-not-fix: or the one at
import torch
from torch import nn

torch.manual_seed(0)


class TiedLM(nn.Module):
    def __init__(self, vocab=60, size=24):
        super().__init__()
        self.embed = nn.Embedding(vocab, size)
        self.rnn = nn.GRU(size, size, batch_first=True)
        self.norm = nn.LayerNorm(size)
        self.out = nn.Linear(size, vocab, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens):
        hidden, _ = self.rnn(self.embed(tokens))
        return self.out(self.norm(hidden))


def log_grad_norms(model, loss, step):
    loss.backward()  # expect: raises
    norms = {n: p.grad.norm().item() for n, p in model.named_parameters() if p.grad is not None}
    print(f"step {step}: loss {loss.item():.4f} embed grad {norms['embed.weight']:.4f}")


model = TiedLM()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
log_every = 2
for step in range(4):
    tokens = torch.randint(0, 60, (4, 11))
    logits = model(tokens[:, :-1])
    targets = tokens[:, 1:].reshape(-1)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 60), targets)  # expect: forward
    opt.zero_grad()
    loss.backward()  # expect: frees
    opt.step()
    if step % log_every == 0:
        log_grad_norms(model, loss, step)  # expect: caller-raises
