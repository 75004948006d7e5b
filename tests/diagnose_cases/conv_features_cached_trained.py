"""A small CNN fine-tuned on features it computed once, before the epochs, for the whole dataset.

Rebuilt from the structure of forum reports of small-dataset image classifiers that "speed up"
training by running the convolutional encoder (Conv2d, BatchNorm2d, ReLU, Flatten, Linear) over
all images once before the loop and slicing mini-batches out of the result, while the encoder's
parameters are in the optimizer with the head's. The first batch's backward goes back through
the encoder's one forward pass and frees it; the next batch's slice leads into the same freed
graph. The encoder is trained, so detaching the features would freeze it: the fix is to compute
the features inside the loop, per batch, `feats = encoder(images[idx])`.
"""

# expect-cause: carried-state
# expect-where: before the loop
# expect-fix: inside the loop
# expect-not-fix: detach
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1),
    nn.BatchNorm2d(8),
    nn.ReLU(),
    nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1),
    nn.BatchNorm2d(16),
    nn.ReLU(),
    nn.Flatten(),
    nn.Linear(16 * 4 * 4, 32),
)
head = nn.Linear(32, 10)
opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.05, momentum=0.9)
images, labels = torch.randn(48, 1, 8, 8), torch.randint(0, 10, (48,))
features = encoder(images)  # expect: forward
for epoch in range(2):
    perm = torch.randperm(48)
    for start in range(0, 48, 16):
        idx = perm[start : start + 16]
        loss = nn.functional.cross_entropy(head(features[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        opt.step()
    print(f"epoch {epoch}: {loss.item():.4f}")
