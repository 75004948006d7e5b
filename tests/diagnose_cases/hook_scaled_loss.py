"""A runner with hooks: two optimizer hooks both call backward on the iteration's loss.

Rebuilt from the structure of an issue-tracker report against a hook-based trainer
(mmcv's GradientCumulativeOptimizerHook added next to the default OptimizerHook): the
runner calls every registered hook after each iteration; the default hook calls
`loss.backward()`, the accumulating one `(loss / factor).backward()`. The second call's
graph is the first call's graph plus one division node. The fix: register one of the two
hooks (here: drop the default OptimizerHook), so the loss goes through backward once.
"""

# expect-cause: same-loss-twice
# expect-fix: once
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def train_step(self, batch):
        images, labels = batch
        logits = self.head(self.backbone(images))
        loss = nn.functional.cross_entropy(logits, labels)  # expect: forward
        return {"loss": loss, "num_samples": len(labels)}


class OptimizerHook:
    def after_train_iter(self, runner):
        runner.optimizer.zero_grad()
        runner.outputs["loss"].backward()  # expect: frees
        runner.optimizer.step()


class GradientCumulativeOptimizerHook:
    def __init__(self, cumulative_iters):
        self.cumulative_iters = cumulative_iters

    def after_train_iter(self, runner):
        loss = runner.outputs["loss"] / self.cumulative_iters
        loss.backward()  # expect: raises
        if (runner.iter + 1) % self.cumulative_iters == 0:
            runner.optimizer.step()
            runner.optimizer.zero_grad()


class Runner:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.hooks = []
        self.iter = 0
        self.outputs = None

    def register_hook(self, hook):
        self.hooks.append(hook)

    def call_hook(self, name):
        for hook in self.hooks:
            getattr(hook, name)(self)

    def train(self, loader):
        for batch in loader:
            self.outputs = self.model.train_step(batch)
            self.call_hook("after_train_iter")
            self.iter += 1


model = Classifier()
runner = Runner(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9))
runner.register_hook(OptimizerHook())
runner.register_hook(GradientCumulativeOptimizerHook(cumulative_iters=4))
loader = [(torch.randn(8, 10), torch.randint(0, 4, (8,))) for _ in range(8)]
runner.train(loader)
