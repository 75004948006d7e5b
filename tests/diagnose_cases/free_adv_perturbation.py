"""Free adversarial training whose carried perturbation is updated out of place, with its graph.

Rebuilt from the structure of reports against ports of free adversarial training (Shafahi et
al. 2019): each minibatch is replayed a few times; every replay trains the model on
`x + delta`, and the same backward gives `delta.grad`, from which `delta` takes an FGSM step and
is clipped to the epsilon ball, carried on to the next replay and the next minibatch. The
reference code keeps the perturbation as a plain buffer and makes a fresh leaf from it each
replay. The reader's port writes `delta = (delta + step * delta.grad.sign()).clamp(-eps, eps)`
and, told by torch's warning that a non-leaf's `.grad` is not populated, adds
`delta.retain_grad()`. Each update's clamp node is then part of the next replay's graph; the
second replay's backward goes through it and frees it, and the third replay's backward, whose
`delta` was built from it, fails there. The fix: start each replay from a fresh leaf,
`delta = delta.detach().requires_grad_()` after the update (or update it in place under
torch.no_grad()); the attack step must not be backpropagated through. A bare
`delta = delta.detach()` is not enough: the next replay reads `delta.grad`, which a tensor
that does not require grad never gets (None, and `.sign()` fails; checked by running it).
retain_graph=True would keep every earlier replay's clamp graph alive, growing without end.
"""

# expect-cause: carried-state
# expect-fix: delta
# expect-not-fix: retain_graph
# expect-not-fix: `delta = delta.detach()`
import torch
from torch import nn

torch.manual_seed(0)
conv = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2))
model = nn.Sequential(conv, nn.Flatten(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
eps, step_size, replays = 8 / 255, 8 / 255, 4
delta = torch.zeros(8, 1, 12, 12, requires_grad=True)
for batch in range(2):
    images, labels = torch.rand(8, 1, 12, 12), torch.randint(0, 4, (8,))
    for replay in range(replays):
        logits = model((images + delta).clamp(0, 1))
        loss = nn.functional.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        delta = (delta + step_size * delta.grad.sign()).clamp(-eps, eps)  # expect: forward
        delta.retain_grad()
        opt.step()
        print(f"batch {batch} replay {replay}: {loss.item():.5f}")
