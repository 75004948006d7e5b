"""A self-attention classifier with a penalty on the value vectors, given its own backward.

Rebuilt from the structure of forum questions about adding a regulariser to a transformer block:
the query, key and value projections are three nn.Linear calls on consecutive lines, the main
loss goes back first, and a penalty on the values' size is then given a backward call of its
own. The penalty's walk reaches the value projection's node, which the first call freed: the
node is built at `v = self.wv(x)`, not at the query or key line above it, though all three run
the same library code from the same place. Both losses come from one forward pass; the fix is to
add them and call backward once.
"""

# expect-cause: shared-forward
# expect-fix: add the losses
import torch
from torch import nn

torch.manual_seed(0)


class AttentionClassifier(nn.Module):
    def __init__(self, width=16, classes=3):
        super().__init__()
        self.wq = nn.Linear(width, width)
        self.wk = nn.Linear(width, width)
        self.wv = nn.Linear(width, width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        q = self.wq(x)
        k = self.wk(x)
        v = self.wv(x)  # expect: forward
        attn = (q @ k.transpose(1, 2) / q.shape[-1] ** 0.5).softmax(dim=-1)
        return self.head((attn @ v).mean(dim=1)), v


model = AttentionClassifier()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    x, y = torch.randn(8, 5, 16), torch.randint(0, 3, (8,))
    logits, values = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    penalty = 1e-3 * values.pow(2).mean()
    opt.zero_grad()
    loss.backward()  # expect: frees
    penalty.backward()  # expect: raises
    opt.step()
    print(f"step {step}: {loss.item():.6f}")
