# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F


class Expert(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, d))

    def forward(self, x):
        return self.net(x)


class MoE(nn.Module):
    def __init__(self, d=16, num_experts=4, hidden=32, k=2):
        super().__init__()
        self.gate = nn.Linear(d, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(d, hidden) for _ in range(num_experts)])
        self.k = k
        self.num_experts = num_experts

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1)  # expect: forward
        topv, topi = probs.topk(self.k, dim=-1)
        topv = topv / topv.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            mask = (topi == e)
            rows = mask.any(-1)
            if rows.any():
                w = (topv * mask).sum(-1, keepdim=True)[rows]
                out[rows] += w * expert(x[rows])
        density = F.one_hot(topi[:, 0], self.num_experts).float().mean(0)
        density_proxy = probs.mean(0)
        aux_loss = (density * density_proxy).mean() * self.num_experts ** 2
        return out, aux_loss


class MoEClassifier(nn.Module):
    def __init__(self, d=16, n_cls=5):
        super().__init__()
        self.embed = nn.Linear(8, d)
        self.moe1 = MoE(d)
        self.moe2 = MoE(d)
        self.cls = nn.Linear(d, n_cls)

    def forward(self, x):
        h = self.embed(x)
        h1, aux1 = self.moe1(h)
        h2, aux2 = self.moe2(h + h1)
        return self.cls(h + h1 + h2), [aux1, aux2]


torch.manual_seed(0)
model = MoEClassifier()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
aux_coef = 1e-2
for step in range(5):
    x = torch.randn(32, 8)
    y = torch.randint(0, 5, (32,))
    logits, aux_losses = model(x)
    task_loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    task_loss.backward()  # expect: frees
    torch.autograd.backward([aux_coef * a for a in aux_losses])  # expect: raises
    opt.step()
    print(step, task_loss.item(), sum(a.item() for a in aux_losses))
