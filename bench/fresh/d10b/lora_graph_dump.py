# expect-cause: saved-read
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r=4, alpha=8):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        self.base.bias.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scaling = alpha / r

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class TinyMLP(nn.Module):
    def __init__(self, d=32, n_cls=4):
        super().__init__()
        self.fc1 = nn.Linear(d, 64)
        self.fc2 = nn.Linear(64, n_cls)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def saved_tensor_report(loss):
    total, seen, stack = 0, set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        for attr in dir(fn):
            if attr.startswith("_saved_"):
                val = getattr(fn, attr)  # expect: raises
                if isinstance(val, torch.Tensor):
                    total += val.numel() * val.element_size()
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return total


torch.manual_seed(0)
model = TinyMLP()
model.fc1 = LoRALinear(model.fc1)
model.fc2 = LoRALinear(model.fc2)
params = [p for p in model.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(params, lr=1e-3)
for step in range(3):
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    loss = F.cross_entropy(model(x), y)  # expect: forward
    optimizer.zero_grad()
    loss.backward()  # expect: frees
    if step == 0:
        print("saved activations (bytes):", saved_tensor_report(loss))
    optimizer.step()
    print(step, loss.item())
