"""Two task losses on one trunk, with retain_graph=True and an optimizer step between the backwards.

Rebuilt from the structure of forum reports of multi-task training that steps after each
task ("so each task updates the trunk"): the first task's backward keeps the graph with
retain_graph=True, `opt.step()` updates the trunk's weights in place, and the second task's
backward needs the trunk's weights as they were in the forward. The fix is the original
cause's: add the two task losses and call backward once before the one step, without
retain_graph.
"""

# expect-cause: inplace-after-retain
# expect-fix: once
# expect-not-fix: retain_graph=True
import torch
from torch import nn

torch.manual_seed(0)


class Trunk(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.heads = nn.ModuleDict({"age": nn.Linear(32, 1), "gender": nn.Linear(32, 2)})

    def forward(self, x):
        h = self.trunk(x)
        return {name: head(h) for name, head in self.heads.items()}


model = Trunk()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for _step in range(3):
    x, age, gender = torch.randn(8, 10), torch.randn(8, 1), torch.randint(0, 2, (8,))
    out = model(x)
    losses = {
        "age": nn.functional.mse_loss(out["age"], age),
        "gender": nn.functional.cross_entropy(out["gender"], gender),
    }
    opt.zero_grad()
    losses["age"].backward(retain_graph=True)  # expect: kept
    opt.step()  # expect: changed
    opt.zero_grad()
    losses["gender"].backward()  # expect: raises
    opt.step()
