# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class SetTransformerClassifier(nn.Module):
    def __init__(self, n_attr=12, n_slots=5, n_classes=3, hidden=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(n_attr, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(hidden, n_classes))

    def forward(self, slot_attrs):
        h = self.enc(slot_attrs)
        return self.head(h.max(dim=1).values)  # expect: forward


class InputGradients:
    def __init__(self, forward_func):
        self.forward_func = forward_func

    def attribute(self, inputs, target):
        outputs = self.forward_func(inputs)
        selected = outputs.gather(1, target[:, None]).sum()
        grads = torch.autograd.grad(selected, inputs)[0]  # expect: frees
        return grads, outputs


class RRRLoss(nn.Module):
    def __init__(self, rrr_weight=10.0):
        super().__init__()
        self.rrr_weight = rrr_weight

    def forward(self, output, target, grads, masks):
        right_answer = F.cross_entropy(output, target)
        right_reason = (masks * grads).pow(2).sum() / output.shape[0]
        return right_answer + self.rrr_weight * right_reason, right_reason


def run_rrr(net, batches, optimizer, criterion):
    explainer = InputGradients(net)
    for i, (slot_attrs, target, masks) in enumerate(batches):
        slot_attrs.requires_grad_(True)
        optimizer.zero_grad()
        saliencies, output = explainer.attribute(slot_attrs, target)
        loss, rr = criterion(output, target, saliencies, masks)
        loss.backward()  # expect: raises
        optimizer.step()
        print(f"batch {i} loss {loss.item():.4f} rrr {rr.item():.4f}")


net = SetTransformerClassifier()
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
batches = []
for _ in range(3):
    x = torch.randn(16, 5, 12)
    y = torch.randint(0, 3, (16,))
    m = torch.zeros_like(x)
    m[..., 8:] = 1.0
    batches.append((x, y, m))
run_rrr(net, batches, optimizer, RRRLoss())
