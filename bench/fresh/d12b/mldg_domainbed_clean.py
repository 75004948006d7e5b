# expect-cause: none
import copy
import random
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.autograd as autograd


def random_pairs_of_minibatches(minibatches):
    perm = torch.randperm(len(minibatches)).tolist()
    pairs = []
    for i in range(len(minibatches)):
        j = i + 1 if i < (len(minibatches) - 1) else 0
        pairs.append((minibatches[perm[i]], minibatches[perm[j]]))
    return pairs


class MLDG(nn.Module):
    """Model-Agnostic Meta-Learning for domain generalisation (Li et al., 2018), first order."""
    def __init__(self, input_dim, num_classes, hparams):
        super().__init__()
        self.hparams = hparams
        self.network = nn.Sequential(nn.Linear(input_dim, 64), nn.ReLU(), nn.Linear(64, num_classes))
        self.optimizer = torch.optim.Adam(self.network.parameters(), lr=hparams["lr"],
                                          weight_decay=hparams["weight_decay"])

    def update(self, minibatches):
        num_mb = len(minibatches)
        objective = 0
        self.optimizer.zero_grad()
        for p in self.network.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        for (xi, yi), (xj, yj) in random_pairs_of_minibatches(minibatches):
            inner_net = copy.deepcopy(self.network)
            inner_opt = torch.optim.Adam(inner_net.parameters(), lr=self.hparams["lr"],
                                         weight_decay=self.hparams['weight_decay'])
            inner_obj = F.cross_entropy(inner_net(xi), yi)
            inner_opt.zero_grad()
            inner_obj.backward()
            inner_opt.step()
            for p_tgt, p_src in zip(self.network.parameters(), inner_net.parameters()):
                if p_src.grad is not None:
                    p_tgt.grad.data.add_(p_src.grad.data / num_mb)
            # `objective` is populated for reporting purposes
            objective += inner_obj.item()
            loss_inner_j = F.cross_entropy(inner_net(xj), yj)
            grad_inner_j = autograd.grad(loss_inner_j, inner_net.parameters(), allow_unused=True)
            objective += (self.hparams['mldg_beta'] * loss_inner_j).item()
            for p, g_j in zip(self.network.parameters(), grad_inner_j):
                if g_j is not None:
                    p.grad.data.add_(self.hparams['mldg_beta'] * g_j.data / num_mb)
        objective /= len(minibatches)
        self.optimizer.step()
        return {'loss': objective}


random.seed(0)
torch.manual_seed(0)
hparams = {"lr": 1e-3, "weight_decay": 0.0, "mldg_beta": 1.0}
algorithm = MLDG(input_dim=16, num_classes=5, hparams=hparams)
shifts = [torch.randn(16) for _ in range(3)]  # three training domains
for step in range(6):
    minibatches = [(torch.randn(32, 16) + s, torch.randint(0, 5, (32,))) for s in shifts]
    step_vals = algorithm.update(minibatches)
    if step % 5 == 0:
        print(step, step_vals)
