"""First-order Proto-MAML: the output layer starts from the support prototypes, then one inner step.

Rebuilt from the structure of issue-tracker reports of first-order (Proto-)MAML loops: the
inner step takes `torch.autograd.grad(inner_loss, params)` without create_graph or
retain_graph and the fast weights are `p - lr * g`. Plain MAML written that way does not
raise (the grads carry no graph, so the query loss reaches the weights through the subtraction
alone). Proto-MAML, as users write it, initialises the output layer from the class prototypes
of the support features (`w = 2 * protos`, `b = -|protos|^2`) and adapts it with the encoder.
The inner `autograd.grad` goes back through those prototypes into the support forward and
frees it; the query loss reaches the same prototypes through the fast head, so
`meta_loss.backward()` fails on the bias's PowBackward0. Two passes over one task's forward:
the inner call must keep the graph, `torch.autograd.grad(..., retain_graph=True)` (or
create_graph=True for second-order MAML); the graph is the task's own, so nothing piles up.
Detaching the prototypes is no fix: the head then needs no grad and autograd.grad refuses it
("One of the differentiated Tensors does not require grad"); made a leaf again, it would run
but drop the meta-gradient through the prototype initialisation.
"""

# expect-cause: shared-forward
# expect-fix: _graph=True
# expect-not-fix: detach
import torch
from torch import nn
from torch.func import functional_call

torch.manual_seed(0)
ways, shots, queries, inner_lr = 5, 2, 3, 0.4
encoder = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 16))
meta_opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
centres = torch.randn(20, 12) * 2


def sample_task():
    classes = torch.randperm(20)[:ways]
    ys, yq = torch.arange(ways).repeat_interleave(shots), torch.arange(ways).repeat(queries)
    xs = centres[classes[ys]] + torch.randn(len(ys), 12)
    return xs, ys, centres[classes[yq]] + torch.randn(len(yq), 12), yq


for iteration in range(3):
    meta_loss = 0.0
    for _task in range(2):
        xs, ys, xq, yq = sample_task()
        params = dict(encoder.named_parameters())
        support = functional_call(encoder, params, (xs,))
        protos = support.view(ways, shots, -1).mean(dim=1)
        params["head.weight"] = 2 * protos
        params["head.bias"] = -(protos**2).sum(dim=1)  # expect: forward
        logits = support @ params["head.weight"].t() + params["head.bias"]
        inner_loss = nn.functional.cross_entropy(logits, ys)
        grads = torch.autograd.grad(inner_loss, list(params.values()))  # expect: frees
        fast = {name: p - inner_lr * g for (name, p), g in zip(params.items(), grads, strict=True)}
        head = {k: fast.pop(k) for k in ("head.weight", "head.bias")}
        query = functional_call(encoder, fast, (xq,))
        logits = query @ head["head.weight"].t() + head["head.bias"]
        meta_loss = meta_loss + nn.functional.cross_entropy(logits, yq)
    meta_opt.zero_grad()
    meta_loss.backward()  # expect: raises
    meta_opt.step()
    print(f"iteration {iteration}: {meta_loss.item():.6f}")
