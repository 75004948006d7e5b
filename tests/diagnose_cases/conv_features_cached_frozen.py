"""A prototype head trained on a frozen CNN's support features, computed once with grad on.

Rebuilt from the structure of forum reports of few-shot and linear-evaluation scripts: a
pretrained convolutional encoder (Conv2d, BatchNorm2d, ReLU, Flatten, Linear) is left out of
the optimizer but its parameters still require grad; the support set is embedded once before
the loop, and a small head is trained on it for several steps. The first backward goes back
into the encoder's forward pass and frees it; the second step reads the same features. Nothing
here trains the encoder, so the fix is to embed the support set under torch.no_grad() (or
detach the features), not to run the frozen encoder again every step.
"""

# expect-cause: carried-state
# expect-where: before the loop
# expect-fix: no_grad
# expect-not-fix: inside the loop
import torch
from torch import nn

torch.manual_seed(0)


def pretrained_encoder():
    encoder = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 24),
    )
    return encoder.eval()


encoder = pretrained_encoder()
support, support_labels = torch.randn(25, 3, 12, 12), torch.arange(5).repeat_interleave(5)
support_feats = encoder(support)  # expect: forward
head = nn.Sequential(nn.Linear(24, 24), nn.ReLU(), nn.Linear(24, 5))
opt = torch.optim.Adam(head.parameters(), lr=1e-2)
for step in range(5):
    logits = head(support_feats + 0.05 * torch.randn_like(support_feats))
    loss = nn.functional.cross_entropy(logits, support_labels)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"step {step}: {loss.item():.4f}")
