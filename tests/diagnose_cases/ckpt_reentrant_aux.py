"""Deep supervision on a model whose blocks run under checkpoint(use_reentrant=True); each output's loss gets a backward."""

# expect-cause: shared-forward
# expect-fix: once
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(10, 24)
        self.block1 = nn.Sequential(nn.Linear(24, 24), nn.GELU())
        self.block2 = nn.Sequential(nn.Linear(24, 24), nn.GELU())
        self.aux_head, self.head = nn.Linear(24, 3), nn.Linear(24, 3)

    def forward(self, x):
        h = self.stem(x).requires_grad_()
        h = checkpoint(self.block1, h, use_reentrant=True)  # expect: forward
        aux = self.aux_head(h)
        h = checkpoint(self.block2, h, use_reentrant=True)
        return self.head(h), aux


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(3):
    x, y = torch.randn(8, 10), torch.randint(0, 3, (8,))
    out, aux = model(x)
    loss_aux = 0.3 * nn.functional.cross_entropy(aux, y)
    loss = nn.functional.cross_entropy(out, y)
    opt.zero_grad()
    loss_aux.backward()  # expect: frees
    loss.backward()  # expect: raises
    opt.step()
    print(f"step {step}: {loss.item():.5f}")
