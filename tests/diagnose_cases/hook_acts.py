"""A sparsity penalty on activations a forward hook collects into a list that is never cleared."""

# expect-cause: carried-state
# expect-fix: activations
# expect-fix: clear
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
activations = []


def keep(module, inputs, output):
    activations.append(output)


for layer in model:
    if isinstance(layer, nn.ReLU):
        layer.register_forward_hook(keep)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    x, y = torch.randn(16, 20), torch.randint(0, 5, (16,))
    logits = model(x)  # expect: forward
    sparsity = sum(a.abs().mean() for a in activations)
    loss = nn.functional.cross_entropy(logits, y) + 1e-3 * sparsity
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"step {step}: {loss.item():.4f}")
