"""An IndRNN written as a subclass of nn.Linear, its hidden state carried across batches.

Rebuilt from the structure of forum reports of hand-written recurrent cells: the reader's
`IndRNNCell(nn.Linear)` overrides forward to add an element-wise recurrent term to the input
projection (`super().forward(x)`), and a small sequence classifier unrolls it over time. To
"keep context between batches" the last hidden state is passed to the next batch as it is, so
the second batch's backward runs into the first batch's last cell step, which the first
backward freed. The fix: detach the carried state between batches, `hidden =
hidden.detach()`.
"""

# expect-cause: carried-state
# expect-fix: hidden
# expect-fix: detach
import torch
from torch import nn

torch.manual_seed(0)


class IndRNNCell(nn.Linear):
    def __init__(self, in_features, hidden):
        super().__init__(in_features, hidden)
        self.recurrent = nn.Parameter(torch.empty(hidden).uniform_(0, 1))

    def forward(self, x, h):
        return torch.relu(super().forward(x) + self.recurrent * h)  # expect: forward


class SequenceClassifier(nn.Module):
    def __init__(self, features=5, hidden=24, classes=3):
        super().__init__()
        self.cell = IndRNNCell(features, hidden)
        self.bn = nn.BatchNorm1d(hidden)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x, h):
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)
        return self.fc(self.bn(h)), h


model = SequenceClassifier()
opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
hidden = torch.zeros(8, 24)
for batch in range(3):
    x, y = torch.randn(8, 10, 5), torch.randint(0, 3, (8,))
    logits, hidden = model(x, hidden)
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"batch {batch}: {loss.item():.4f}")
