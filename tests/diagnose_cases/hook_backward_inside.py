"""Grad-CAM guided training: a tensor hook builds an attention loss and calls backward on it.

Rebuilt from the structure of forum questions about attention-guided training (GAIN-style
attention mining): the channel gradients of the pooled features are caught with
`pooled.register_hook(...)`, the hook weights the feature map with them into a class
activation map and calls `am_loss.backward()` on a loss between that map and a mask. The hook
runs inside the classification loss's backward, before that walk has reached the feature
extractor; the inner backward goes through the same feature map and frees its graph, and the
outer walk then fails on it. The two losses share one forward pass. The fix: keep that graph
for the outer walk, `am_loss.backward(retain_graph=True)` in the hook (or take the gradient with
torch.autograd.grad, add the two losses and call backward once outside the hook).
"""

# expect-cause: shared-forward
# expect-fix: hook
# expect-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(8, classes)


model = Classifier()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
alpha = 0.5

for step in range(3):
    images = torch.randn(4, 1, 12, 12)
    labels = torch.randint(0, 3, (4,))
    masks = (torch.rand(4, 12, 12) > 0.5).float()
    fmap = model.features(images)  # expect: forward
    pooled = fmap.mean(dim=(2, 3))
    logits = model.head(pooled)

    def attention_mining(grad, fmap=fmap, masks=masks):
        weights = grad[:, :, None, None]  # Grad-CAM channel weights
        with torch.enable_grad():  # hooks run with grad mode off
            cam = torch.relu((weights * fmap).sum(dim=1))
            cam = cam / (cam.amax(dim=(1, 2), keepdim=True) + 1e-6)
            am_loss = alpha * ((cam - masks) ** 2).mean()
            am_loss.backward()  # expect: frees

    pooled.register_hook(attention_mining)
    loss = nn.functional.cross_entropy(logits, labels)
    opt.zero_grad()
    loss.backward()  # expect: raises
    opt.step()
    print(f"step {step}: {loss.item():.6f}")
