# Source: https://github.com/davda54/sam/issues/45
# Shape: SAM's two-pass step, but the second pass re-scores the first pass's `output` instead of a new forward.
import torch
import torch.nn as nn


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        norm = torch.norm(
            torch.stack(
                [
                    p.grad.norm()
                    for g in self.param_groups
                    for p in g["params"]
                    if p.grad is not None
                ]
            )
        )
        for group in self.param_groups:
            scale = group["rho"] / (norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale
                p.add_(e_w)
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if "e_w" in self.state[p]:
                    p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))
criterion = nn.CrossEntropyLoss()
optimizer = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)

for step in range(3):
    images = torch.randn(16, 20)
    target = torch.randint(0, 5, (16,))
    output = model(images)
    # first forward-backward pass
    loss = criterion(output, target)
    loss.backward()
    optimizer.first_step(zero_grad=True)
    # second forward-backward pass
    criterion(output, target).backward()
    optimizer.second_step(zero_grad=True)
    acc = (output.argmax(1) == target).float().mean().item()
    print(f"step {step} loss {loss.item():.4f} acc {acc:.2f}")
