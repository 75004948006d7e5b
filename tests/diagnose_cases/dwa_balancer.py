"""A multi-task loss balancer (Dynamic Weight Average) that keeps each epoch's task losses.

Rebuilt from the structure of issue-tracker reports against multi-task training code: a
scheduler-like object records the task losses after every step in `self.history` and weights
the next step's tasks by the ratio of the last two entries. The recorded losses are the
tensors themselves, so each step's weights hold the graphs of the two steps before. The fix:
record detached values (`loss.detach()`, or `.item()`) in the history.
"""

# expect-cause: carried-state
# expect-fix: detach
# expect-fix: .history
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class DynamicWeightAverage:
    def __init__(self, tasks, temperature=2.0):
        self.tasks = tasks
        self.temperature = temperature
        self.history = []

    def weights(self):
        if len(self.history) < 2:
            return torch.ones(self.tasks)
        ratio = self.history[-1] / self.history[-2]
        return self.tasks * torch.softmax(ratio / self.temperature, dim=0)

    def record(self, task_losses):
        self.history.append(torch.stack(task_losses))


class TwoTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.depth = nn.Linear(32, 1)
        self.segment = nn.Linear(32, 4)

    def forward(self, x):
        h = self.shared(x)
        return self.depth(h), self.segment(h)

    def task_losses(self, x, depth, classes):
        d, c = self(x)
        return [F.l1_loss(d, depth), F.cross_entropy(c, classes)]  # expect: forward


model = TwoTask()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
balancer = DynamicWeightAverage(tasks=2)
for step in range(5):
    x, depth, classes = torch.randn(6, 8), torch.randn(6, 1), torch.randint(0, 4, (6,))
    task_losses = model.task_losses(x, depth, classes)
    w = balancer.weights()
    loss = w[0] * task_losses[0] + w[1] * task_losses[1]
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    balancer.record(task_losses)
    print(f"step {step}: {loss.item():.6f}")
