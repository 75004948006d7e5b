"""A node classifier that runs its GCN over the whole graph once per epoch, then steps per node batch.

Rebuilt from the structure of issue and forum reports of "mini-batch" GNN training (and a
scaling tutorial's notebook that had the same slip): the epoch starts with one full-graph
forward pass, `out = model(x, adj)`, and the loop over batches of training nodes slices
`out[idx]` for each batch's loss, calling backward and stepping per batch. The first batch's
backward frees that full-graph pass; the second batch's slice leads back into it. The GCN's
weights are trained, so detaching `out` would freeze them, and retain_graph=True would trade
the error for the in-place one (each `opt.step()` changes the weights the pass saved). The
fix: run the forward pass inside the batch loop, `out = model(x, adj)` per batch (or on the
batch's sampled subgraph), or train full-batch with one backward and step per epoch.
"""

# expect-cause: carried-state
# expect-fix: inside the loop
# expect-not-fix: detach
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class GCN(nn.Module):
    def __init__(self, features=10, hidden=16, classes=3):
        super().__init__()
        self.lin1 = nn.Linear(features, hidden)
        self.lin2 = nn.Linear(hidden, classes)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x, adj):
        h = torch.relu(adj @ self.lin1(x))
        return adj @ self.lin2(self.dropout(h))  # expect: forward


nodes = 60
x = torch.randn(nodes, 10)
edges = torch.randint(0, nodes, (2, 150))
adj = torch.eye(nodes)
adj[edges[0], edges[1]] = 1.0
adj = ((adj + adj.t()) > 0).float()
deg = adj.sum(1)
adj = adj / torch.sqrt(deg[:, None] * deg[None, :])
y = torch.randint(0, 3, (nodes,))
train_idx = torch.randperm(nodes)[:40]
model = GCN()
opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
for epoch in range(2):
    model.train()
    out = model(x, adj)
    for idx in train_idx[torch.randperm(len(train_idx))].split(10):
        loss = nn.functional.cross_entropy(out[idx], y[idx])
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        opt.step()
    print(f"epoch {epoch}: {loss.item():.4f}")
