"""GradNorm task weighting whose total-loss backward drops retain_graph=True.

Rebuilt from the structure of public GradNorm implementations (Chen et al. 2018) and the
questions about them: the model returns one loss per task, the weighted sum goes back first,
then each task's gradient norm at the last shared layer is taken with
`torch.autograd.grad(task_loss[i], shared.parameters(), retain_graph=True)`, and the GradNorm
loss on those norms gives the task weights their own gradient before the optimizer steps.
The reference code calls the first backward with retain_graph=True; the reader's version
dropped it as "not needed", so the first autograd.grad call goes back into the task losses'
graph that backward freed. No step runs between the calls and nothing is carried across
steps, so keeping the graph is right: `loss.backward(retain_graph=True)` (or take the norms
first, with their retain_graph=True, and backward last). Adding the losses and calling
backward once is no fix: the weights must not be trained by the weighted loss itself.
"""

# expect-cause: shared-forward
# expect-fix: retain_graph
# expect-not-fix: add the losses
import torch
from torch import nn

torch.manual_seed(0)


class MultiTask(nn.Module):
    def __init__(self, n_tasks=2):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(32, 1) for _ in range(n_tasks)])
        self.weights = nn.Parameter(torch.ones(n_tasks))

    def shared_layer(self):
        return self.trunk[2]

    def forward(self, x, targets):
        feats = self.trunk(x)
        mse, pairs = nn.functional.mse_loss, zip(self.heads, targets, strict=True)
        return torch.stack([mse(h(feats), t) for h, t in pairs])  # expect: forward


model = MultiTask()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
alpha, initial = 1.5, None
for step in range(3):
    x = torch.randn(32, 10)
    targets = [x[:, :1] * 2, x[:, 1:2].sin()]
    task_loss = model(x, targets)
    if initial is None:
        initial = task_loss.detach()
    loss = (model.weights * task_loss).sum()
    opt.zero_grad()
    loss.backward()  # expect: frees
    model.weights.grad = None
    shared = list(model.shared_layer().parameters())
    norms = []
    for i in range(len(task_loss)):
        (g, _) = torch.autograd.grad(task_loss[i], shared, retain_graph=True)  # expect: raises
        norms.append(torch.norm(model.weights[i] * g))
    norms = torch.stack(norms)
    ratio = task_loss.detach() / initial
    target_norm = (norms.mean() * (ratio / ratio.mean()) ** alpha).detach()
    gradnorm_loss = (norms - target_norm).abs().sum()
    model.weights.grad = torch.autograd.grad(gradnorm_loss, model.weights)[0]
    opt.step()
    with torch.no_grad():
        model.weights.mul_(len(task_loss) / model.weights.sum())
    print(f"step {step}: {task_loss.tolist()} weights {model.weights.tolist()}")
