"""Deep mutual learning: two classifiers, each pulled toward its peer's prediction, not detached.

Rebuilt from the structure of issue-tracker reports against Deep Mutual Learning
reimplementations (Zhang et al. 2018): each batch is scored once by every network
(`outputs.append(model(images))`), then for each network in turn its loss is its cross-entropy
plus the KL divergence toward every peer's softened prediction, and that network's optimizer
runs `zero_grad(); loss.backward(); step()`. The reference trainer wraps the peer's output in
`Variable(...)`, which on torch 2.x returns a tensor without its graph; the reader's version
drops the wrapper, so the first network's backward also goes into the second network's forward
and frees it, and the second network's backward fails there. Both losses go back through the
one forward of the batch. The fix, as the paper's algorithm has it: a peer's prediction is a
target, `F.softmax(outputs[j].detach() / T, dim=1)`; each loss then goes back through its own
network only. Adding the losses and calling backward once would run but train each network on
its peers' losses too; retain_graph=True trades this error for the in-place one, as the first
`step()` changes the weights the second loss goes back through.
"""

# expect-cause: shared-forward
# expect-fix: detach
# expect-fix: outputs[j]
# expect-not-fix: retain_graph=True
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


def make_net():
    return nn.Sequential(
        nn.Linear(20, 48), nn.BatchNorm1d(48), nn.ReLU(), nn.Dropout(0.1), nn.Linear(48, 5)
    )


models = [make_net(), make_net()]
optimizers = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in models]
kl_div = nn.KLDivLoss(reduction="batchmean")
T = 2.0
for step in range(3):
    images, labels = torch.randn(16, 20), torch.randint(0, 5, (16,))
    outputs = []
    for model in models:
        outputs.append(model(images))  # expect: forward
    for i in range(len(models)):
        ce_loss = F.cross_entropy(outputs[i], labels)
        kl_loss = 0.0
        for j in range(len(models)):
            if i != j:
                log_p = F.log_softmax(outputs[i] / T, dim=1)
                kl_loss += kl_div(log_p, F.softmax(outputs[j] / T, dim=1))
        loss = ce_loss + T * T * kl_loss / (len(models) - 1)
        optimizers[i].zero_grad()
        loss.backward()  # expect: raises frees
        optimizers[i].step()
        print(f"step {step} model {i}: {loss.item():.4f}")
