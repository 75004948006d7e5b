# expect-cause: none
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
IN, HID, OUT = 10, 16, 2
SHAPES = [(HID, IN), (HID,), (OUT, HID), (OUT,)]


class HyperNetwork(nn.Module):
    def __init__(self, num_tasks, emb_dim=8):
        super().__init__()
        self.task_embs = nn.Parameter(torch.randn(num_tasks, emb_dim) * 0.1)
        self.body = nn.Sequential(nn.Linear(emb_dim, 64), nn.ReLU())
        self.heads = nn.ModuleList([nn.Linear(64, torch.Size(s).numel()) for s in SHAPES])

    def forward(self, task_id):
        h = self.body(self.task_embs[task_id])
        return [head(h).view(s) for head, s in zip(self.heads, SHAPES)]


def target_forward(x, weights):
    w1, b1, w2, b2 = weights
    return F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)


def calc_reg(hnet, current_task, targets):
    reg = 0.0
    for task_id in range(current_task):
        weights = hnet(task_id)
        reg = reg + sum((w - t).pow(2).sum() for w, t in zip(weights, targets[task_id]))
    return reg / max(current_task, 1)


hnet = HyperNetwork(num_tasks=3)
optimizer = torch.optim.Adam(hnet.parameters(), lr=1e-3)
targets = {}
for task_id in range(3):
    w_true = torch.randn(IN)
    for step in range(15):
        x = torch.randn(32, IN)
        y = (x @ w_true > 0).long()
        weights = hnet(task_id)
        loss_task = F.cross_entropy(target_forward(x, weights), y)
        loss = loss_task + 0.01 * calc_reg(hnet, task_id, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        targets[task_id] = [w.clone() for w in hnet(task_id)]
    print(f"task {task_id} final loss {loss.item():.4f}")
