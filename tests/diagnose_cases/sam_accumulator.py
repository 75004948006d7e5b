"""A two-pass optimizer (SAM) whose closure adds loss terms to an accumulator kept on the trainer.

Rebuilt from the structure of issue-tracker reports against SAM implementations
(`optimizer.step(closure)` runs the closure, perturbs the weights, runs it again): the
trainer resets `self.loss` once per batch, but the closure adds each weighted criterion to it
with `+=`, so the second pass's sum still holds the first pass's terms and their graph. The
fix: start a fresh accumulator inside the closure (`self.loss = 0.0` as its first line).
"""

# expect-cause: carried-state
# expect-fix: self.loss
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)

    @torch.no_grad()
    def first_step(self):
        norm = torch.norm(
            torch.stack([p.grad.norm() for g in self.param_groups for p in g["params"]])
        )
        for group in self.param_groups:
            scale = group["rho"] / (norm + 1e-12)
            for p in group["params"]:
                e_w = p.grad * scale
                p.add_(e_w)
                self.state[p]["e_w"] = e_w
        self.zero_grad()

    @torch.no_grad()
    def second_step(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        self.zero_grad()

    def step(self, closure):
        closure = torch.enable_grad()(closure)
        closure()  # expect: caller-frees
        self.first_step()
        closure()  # expect: caller-raises
        self.second_step()


class Trainer:
    def __init__(self, model, optimizer, criteria):
        self.model = model
        self.optimizer = optimizer
        self.criteria = criteria
        self.loss = 0.0

    def train_batch(self, inputs, targets):
        self.loss = 0.0

        def closure():
            outputs = self.model(inputs)
            for weight, criterion in self.criteria:
                self.loss += weight * criterion(outputs, targets)  # expect: forward
            self.loss.backward()  # expect: raises frees
            return self.loss

        self.optimizer.step(closure)
        return self.loss.item()


model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
optimizer = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.1, momentum=0.9)
criteria = [(1.0, nn.CrossEntropyLoss()), (0.1, nn.CrossEntropyLoss(label_smoothing=0.1))]
trainer = Trainer(model, optimizer, criteria)
for _batch in range(3):
    print(f"{trainer.train_batch(torch.randn(16, 8), torch.randint(0, 3, (16,))):.6f}")
