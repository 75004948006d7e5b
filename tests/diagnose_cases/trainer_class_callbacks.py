"""A small Trainer class whose on_after_backward callback backpropagates a gradient-norm penalty.

Rebuilt from the structure of reports about Lightning-style trainers written by hand: `fit`
calls `training_step`, then `backward`, then the `on_after_backward` hook, then the optimizer
step. The user adds an input-gradient-norm regulariser (double backprop): `training_step`
takes d(loss)/d(x) with create_graph=True and keeps its squared norm on `self.grad_penalty`,
and `on_after_backward` calls `.backward()` on the weighted penalty. Its graph runs back into
the same step's forward pass, which `backward(loss)` has just freed. Two losses on one forward
pass: the fix is to add the penalty to the loss in `training_step` and call backward once
(retain_graph=True on the first backward also runs here, at the cost of keeping the graph).
"""

# expect-cause: shared-forward
# expect-fix: once
import torch
from torch import nn

torch.manual_seed(0)


class Trainer:
    def __init__(self, model, lr=1e-2, penalty_weight=0.1):
        self.model = model
        self.penalty_weight = penalty_weight
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.grad_penalty = None

    def training_step(self, batch):
        x, y = batch
        x = x.requires_grad_(True)
        logits = self.model(x)
        loss = nn.functional.cross_entropy(logits, y)  # expect: forward
        (grad_x,) = torch.autograd.grad(loss, x, create_graph=True)
        self.grad_penalty = grad_x.pow(2).sum(dim=1).mean()
        return loss

    def backward(self, loss):
        loss.backward()  # expect: frees

    def on_after_backward(self):
        (self.penalty_weight * self.grad_penalty).backward()  # expect: raises

    def fit(self, loader, epochs=2):
        for epoch in range(epochs):
            for batch in loader:
                self.optimizer.zero_grad()
                loss = self.training_step(batch)
                self.backward(loss)  # expect: caller-frees
                self.on_after_backward()  # expect: caller-raises
                self.optimizer.step()
            print(f"epoch {epoch}: {loss.item():.4f}")


model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3))
loader = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(4)]
Trainer(model).fit(loader)
