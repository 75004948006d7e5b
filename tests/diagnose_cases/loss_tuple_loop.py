"""A detector returns a tuple of losses from one forward; the loop calls backward on each.

Rebuilt from the structure of forum reports of multi-loss models ("I have two losses, I call
backward on each"): the model's forward returns (classification loss, box loss) computed on
one shared backbone, and the training loop iterates `for loss in losses: loss.backward()`.
Both calls sit on one line, in one step, on one forward. The fix: sum the tuple and call
backward once (`sum(losses).backward()`).
"""

# expect-cause: shared-forward
# expect-fix: once
import torch
from torch import nn

torch.manual_seed(0)


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.cls_head = nn.Linear(32, 3)
        self.box_head = nn.Linear(32, 4)

    def forward(self, images, labels, boxes):
        features = self.backbone(images)  # expect: forward
        loss_cls = nn.functional.cross_entropy(self.cls_head(features), labels)
        loss_box = nn.functional.smooth_l1_loss(self.box_head(features), boxes)
        return loss_cls, loss_box


def train_one_epoch(model, optimizer, batches):
    for images, labels, boxes in batches:
        losses = model(images, labels, boxes)
        optimizer.zero_grad()
        for loss in losses:
            loss.backward()  # expect: raises frees
        optimizer.step()


model = TinyDetector()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
batches = [(torch.randn(6, 16), torch.randint(0, 3, (6,)), torch.randn(6, 4)) for _ in range(3)]
train_one_epoch(model, optimizer, batches)
