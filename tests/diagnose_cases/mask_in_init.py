"""A pruning model whose soft mask is computed from learnable logits once, in __init__."""

# expect-cause: carried-state
# expect-where: before the loop
# expect-fix: mask
# expect-fix: inside the loop
# expect-not-fix: detach
import torch
from torch import nn

torch.manual_seed(0)


class MaskedMLP(nn.Module):
    def __init__(self, d_in=30, d_hidden=40, d_out=2):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)
        self.mask_logits = nn.Parameter(torch.full((d_hidden,), 2.0))
        self.mask = torch.sigmoid(self.mask_logits)  # expect: forward

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)) * self.mask)


model = MaskedMLP()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(3):
    x, y = torch.randn(16, 30), torch.randint(0, 2, (16,))
    loss = nn.functional.cross_entropy(model(x), y) + 1e-3 * model.mask.sum()
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"step {step}: {loss.item():.4f}")
