"""An Accelerate-style `accelerator.backward(loss)` called by the loop and again by a callback.

Rebuilt from the structure of issue-tracker reports against training loops built on a
library's backward helper (`accelerator.backward(loss)` divides by the accumulation steps and
calls backward): the loop calls the helper, and a gradient-norm logging callback added later
calls it again on the same loss to make sure gradients are there. Both calls run the helper's
one line. The fix: call backward once (the callback reads the gradients the loop's call made).
"""

# expect-cause: same-loss-twice
# expect-fix: once
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class Accelerator:
    def __init__(self, gradient_accumulation_steps=1):
        self.gradient_accumulation_steps = gradient_accumulation_steps

    def backward(self, loss):
        loss = loss / self.gradient_accumulation_steps
        loss.backward()  # expect: raises frees


class GradNormLogger:
    def on_before_optimizer_step(self, trainer, loss):
        trainer.accelerator.backward(loss)  # expect: caller-raises
        norms = [p.grad.norm() for p in trainer.model.parameters() if p.grad is not None]
        print(f"grad norm {torch.stack(norms).norm().item():.6f}")


class Trainer:
    def __init__(self, model, optimizer, callbacks):
        self.model = model
        self.optimizer = optimizer
        self.callbacks = callbacks
        self.accelerator = Accelerator(gradient_accumulation_steps=2)

    def fit(self, batches):
        for inputs, targets in batches:
            loss = nn.functional.mse_loss(self.model(inputs), targets)  # expect: forward
            self.optimizer.zero_grad()
            self.accelerator.backward(loss)  # expect: caller-frees
            for callback in self.callbacks:
                callback.on_before_optimizer_step(self, loss)
            self.optimizer.step()


model = nn.Sequential(nn.Linear(6, 24), nn.GELU(), nn.Linear(24, 1))
trainer = Trainer(model, torch.optim.AdamW(model.parameters(), lr=1e-3), [GradNormLogger()])
trainer.fit([(torch.randn(8, 6), torch.randn(8, 1)) for _ in range(3)])
