"""Clean: DP-SGD by hand, one backward per example on a batch's single forward, retain_graph=True.

Rebuilt from the structure of differentially private training code written before per-sample
gradient libraries, and the review threads about it: the batch is scored in one forward pass,
each example's loss goes back with retain_graph=True (the next example's backward needs the
same graph), its gradient is copied out and clipped to a norm bound, the clipped gradients are
summed, Gaussian noise is added, and the result is written to `.grad` before the optimizer
steps once. The last example's backward drops retain_graph. No step runs between the calls
and the graph is the batch's own: retaining it is right, and nothing is reported.
"""

# expect-clean
# expect-cause: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
params = list(model.parameters())
max_norm, noise_multiplier = 1.0, 1.1
for step in range(3):
    x, y = torch.randn(8, 10), torch.randint(0, 3, (8,))
    losses = nn.functional.cross_entropy(model(x), y, reduction="none")
    summed = [torch.zeros_like(p) for p in params]
    for i in range(len(losses)):
        opt.zero_grad()
        losses[i].backward(retain_graph=i < len(losses) - 1)
        grads = [p.grad.detach().clone() for p in params]
        norm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
        scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        for acc, g in zip(summed, grads, strict=True):
            acc.add_(g * scale)
    for p, acc in zip(params, summed, strict=True):
        noise = torch.randn_like(acc) * noise_multiplier * max_norm
        p.grad = (acc + noise) / len(losses)
    opt.step()
    print(f"step {step}: {losses.mean().item():.5f}")
