"""A SAM step done right: each pass of the closure starts its accumulator fresh.

The corrected form of sam_accumulator.py (rebuilt from reports against SAM implementations):
the closure runs a full forward and backward on each of the optimizer's two passes, with a new
`loss` each time. It runs without the error and adds no gradient twice.
"""

# expect-clean
# expect-cause: none
import torch
from torch import nn

torch.manual_seed(0)


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)

    @torch.no_grad()
    def step(self, closure):
        closure = torch.enable_grad()(closure)
        loss = closure()
        norm = torch.norm(
            torch.stack([p.grad.norm() for g in self.param_groups for p in g["params"]])
        )
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["e_w"] = p.grad * group["rho"] / (norm + 1e-12)
                p.add_(self.state[p]["e_w"])
        self.zero_grad()
        closure()
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        self.zero_grad()
        return loss


model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
criteria = [(1.0, nn.CrossEntropyLoss()), (0.1, nn.CrossEntropyLoss(label_smoothing=0.1))]


def train_batch(inputs, targets):
    def closure():
        outputs = model(inputs)
        loss = 0.0
        for weight, criterion in criteria:
            loss += weight * criterion(outputs, targets)
        loss.backward()
        return loss

    return optimizer.step(closure)


for batch in range(3):
    loss = train_batch(torch.randn(16, 8), torch.randint(0, 3, (16,)))
    print(f"batch {batch}: {loss.item():.6f}")
