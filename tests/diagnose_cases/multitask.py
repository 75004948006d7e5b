"""A multi-task model: one shared trunk, two heads, one backward per task loss."""

# expect-cause: shared-forward
import torch
from torch import nn

torch.manual_seed(0)


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.classify = nn.Linear(32, 3)
        self.regress = nn.Linear(32, 1)

    def forward(self, x):
        features = self.trunk(x)  # expect: forward
        return self.classify(features), self.regress(features)


model = MultiTask()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _step in range(3):
    x, labels, values = torch.randn(16, 10), torch.randint(0, 3, (16,)), torch.randn(16, 1)
    logits, predicted = model(x)
    opt.zero_grad()
    nn.functional.cross_entropy(logits, labels).backward()  # expect: frees
    nn.functional.mse_loss(predicted, values).backward()  # expect: raises
    opt.step()
