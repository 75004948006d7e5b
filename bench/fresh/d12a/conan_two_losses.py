# CONAN multi-view contrastive clustering: SimCLR consensus loss + clustering loss (Guanzhou-Ke/conan, issues #3/#4 code)
# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class SimCLRLoss(nn.Module):
    def __init__(self, temperature=0.5):
        super().__init__()
        self.temp = temperature

    def forward(self, ps):
        n = ps.size(0) // 2
        h1, h2 = F.normalize(ps[:n], dim=1), F.normalize(ps[n:], dim=1)
        labels = torch.arange(0, n)
        masks = torch.eye(n)
        logits_aa = h1 @ h1.t() / self.temp - masks * 1e9
        logits_bb = h2 @ h2.t() / self.temp - masks * 1e9
        logits_ab, logits_ba = h1 @ h2.t() / self.temp, h2 @ h1.t() / self.temp
        loss_a = F.cross_entropy(torch.cat((logits_ab, logits_aa), dim=1), labels)
        loss_b = F.cross_entropy(torch.cat((logits_ba, logits_bb), dim=1), labels)
        return loss_a + loss_b


class ContrastiveModule(nn.Module):
    def __init__(self, hidden_dim, proj_dim, con_lambda=0.5):
        super().__init__()
        self.projector = nn.Sequential(nn.Linear(hidden_dim, proj_dim), nn.ReLU(), nn.Linear(proj_dim, proj_dim))
        self.con_criterion = SimCLRLoss()
        self.con_lambda = con_lambda

    def forward(self, h):
        return self.projector(h)

    def get_loss(self, ch, hs):
        cp = self(ch)
        sub_loss = 0
        for h in hs:
            p = self(h)
            ps = torch.cat([cp, p], dim=0)
            sub_loss += self.con_criterion(ps)
        return self.con_lambda * sub_loss


class CONAN(nn.Module):
    def __init__(self, view_dims=(12, 20), hidden_dim=32, n_clusters=4):
        super().__init__()
        self.encoders = nn.ModuleList([nn.Sequential(nn.Linear(d, hidden_dim), nn.ReLU()) for d in view_dims])
        self.fusion = nn.Linear(hidden_dim * len(view_dims), hidden_dim)
        self.contrastive = ContrastiveModule(hidden_dim, 16)
        self.cluster_head = nn.Sequential(nn.Linear(hidden_dim, n_clusters), nn.Softmax(dim=1))

    def forward(self, views):
        hs = [enc(v) for enc, v in zip(self.encoders, views)]
        ch = self.fusion(torch.cat(hs, dim=1))  # expect: forward
        return hs, ch, self.cluster_head(ch)


def clustering_loss(y):
    cluster_sizes = y.sum(0) / y.sum()
    return (cluster_sizes * torch.log(cluster_sizes * y.size(1) + 1e-8)).sum() - (y * torch.log(y + 1e-8)).sum(1).mean()


model = CONAN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [torch.randn(96, 12), torch.randn(96, 20)]
for epoch in range(2):
    for i in range(0, 96, 32):
        views = [v[i:i + 32] for v in data]
        hs, ch, y = model(views)
        con_loss = model.contrastive.get_loss(ch, hs)
        clu_loss = clustering_loss(y)
        optimizer.zero_grad()
        con_loss.backward()  # expect: frees
        clu_loss.backward()  # expect: raises
        optimizer.step()
    print(f'epoch {epoch} con {con_loss.item():.4f} clu {clu_loss.item():.4f}')
