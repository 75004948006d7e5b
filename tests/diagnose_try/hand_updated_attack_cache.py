# https://github.com/sigeisler/robustness_of_gnns_at_scale/issues/4
# PR-BCD-style structure attack: edge perturbations updated by hand (no optimizer); the GCN caches its normalized adjacency in train mode.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class GCNConv(nn.Module):
    def __init__(self, d_in, d_out, cached=True):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out)
        self.cached = cached
        self._cached_adj = None

    def normalize(self, adj):
        adj = adj + torch.eye(adj.size(0))
        deg_inv_sqrt = adj.sum(1).pow(-0.5)
        return deg_inv_sqrt[:, None] * adj * deg_inv_sqrt[None, :]

    def forward(self, x, adj):
        if self.cached and self.training:
            if self._cached_adj is None:
                self._cached_adj = self.normalize(adj)
            norm_adj = self._cached_adj
        else:
            norm_adj = self.normalize(adj)
        return norm_adj @ self.lin(x)


class GCN(nn.Module):
    def __init__(self, d_in, d_hid, n_cls):
        super().__init__()
        self.conv1 = GCNConv(d_in, d_hid)
        self.conv2 = GCNConv(d_hid, n_cls)

    def forward(self, x, adj):
        return self.conv2(F.relu(self.conv1(x, adj)), adj)


def grad_with_checkpoint(outputs, inputs):
    outputs.backward()
    grad = inputs.grad.clone()
    inputs.grad = None
    return grad


n, d, n_cls, budget = 24, 12, 3, 10.0
x = torch.randn(n, d)
labels = torch.randint(0, n_cls, (n,))
adj = (torch.rand(n, n) < 0.15).float().triu(1)
adj = adj + adj.t()

attacked_model = GCN(d, 16, n_cls)
attacked_model.train()  # the reporter's change: the loss they use needs train mode
perturbed_edge_weight = torch.full((n, n), 1e-3, requires_grad=True)

for epoch in range(5):
    p = perturbed_edge_weight.triu(1)
    p = p + p.t()
    modified_adj = adj + (1 - 2 * adj) * p
    logits = attacked_model(x, modified_adj)
    loss = F.cross_entropy(logits, labels)
    grad = grad_with_checkpoint(loss, perturbed_edge_weight)
    with torch.no_grad():
        perturbed_edge_weight += 0.1 * budget * grad / (grad.abs().max() + 1e-12)
        perturbed_edge_weight.clamp_(0, 1)
    print(
        f"epoch {epoch}: attack loss {loss.item():.4f}, perturbation mass {perturbed_edge_weight.sum().item():.2f}"
    )
