"""Gradient accumulation that also keeps the window's loss as a tensor and backprops it.

Rebuilt from the structure of forum reports of gradient-accumulation loops: each micro-batch's
loss is scaled and backpropagated at once, `(loss / accum).backward()`, and the same loss is
also added to a running `epoch_loss` tensor (meant as a log, written without `.item()`). Every
`accum` micro-batches the script steps the optimizer and then calls `epoch_loss.backward()`
for the "window objective" it logs. That call walks back into the micro-batches' own graphs,
which their backward calls already freed: it fails at once, on the last micro-batch's loss
node, freed by the `(loss / accum).backward()` just before it. Each loss is backpropagated
twice. The fix: backprop each loss once (the micro-step already does; the window total's
gradient is only the same gradients again) and keep the log as numbers: `epoch_loss +=
loss.detach()` (or `.item()`), with no backward on it. retain_graph=True on the micro-step only
trades this error for torch's in-place one (opt.step() has changed the weights the kept graphs
saved), and would otherwise add each window's gradients a second time after its step.
"""

# expect-cause: same-loss-twice
# expect-fix: epoch_loss
# expect-fix: detach
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class Regressor(nn.Module):
    def __init__(self, features=10, hidden=32):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(self.body(x)).squeeze(-1)


model = Regressor()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
inputs, targets = torch.randn(64, 10), torch.randn(64)
accum, batch = 4, 8
for epoch in range(2):
    epoch_loss = torch.zeros(())
    opt.zero_grad()
    for i, start in enumerate(range(0, 64, batch)):
        x, y = inputs[start : start + batch], targets[start : start + batch]
        loss = nn.functional.mse_loss(model(x), y)  # expect: forward
        (loss / accum).backward()  # expect: frees
        epoch_loss += loss
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
            epoch_loss.backward()  # expect: raises
    print(f"epoch {epoch}: {epoch_loss.item() / 8:.6f}")
