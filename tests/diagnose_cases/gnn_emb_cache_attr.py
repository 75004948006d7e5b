"""A GNN link-prediction trainer that keeps last epoch's node embeddings on `self.emb_cache`.

Rebuilt from the structure of forum and research-code reports of hard-negative mining for link
prediction: at the end of each epoch the trainer stores the embeddings of its last step on the
module (`self.emb_cache = emb`, the whole tensor, not written in place) and the next epoch draws
hard negatives from it: for each source node, the most similar cached node that is not a true
neighbour, scored with its cached embedding (saving a lookup into the fresh forward). The
cached tensor still holds the graph of last epoch's final forward, which that step's backward
freed, so the next epoch's first backward fails. The fix: store the detached embeddings,
`self.emb_cache = emb.detach()` (every parameter still trains through the fresh `emb`).
retain_graph=True would not help: the old graph saved weights that opt.step() has changed.
"""

# expect-cause: carried-state
# expect-fix: self.emb_cache
# expect-fix: detach
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class GCN(nn.Module):
    def __init__(self, features=8, hidden=16, out=8):
        super().__init__()
        self.lin1 = nn.Linear(features, hidden)
        self.lin2 = nn.Linear(hidden, out)

    def forward(self, x, adj):
        h = torch.relu(adj @ self.lin1(x))
        return adj @ self.lin2(h)  # expect: forward


class LinkTrainer:
    def __init__(self, model, x, adj, edges):
        self.model, self.x, self.adj, self.edges = model, x, adj, edges
        self.opt = torch.optim.Adam(model.parameters(), lr=0.01)
        self.emb_cache = None

    def hard_negatives(self, src):
        scores = self.emb_cache[src] @ self.emb_cache.t()
        scores = scores.masked_fill(self.adj[src] > 0, float("-inf"))
        return self.emb_cache[scores.argmax(dim=1)]

    def train_epoch(self):
        for batch in self.edges.split(16):
            emb = self.model(self.x, self.adj)
            src, dst = emb[batch[:, 0]], emb[batch[:, 1]]
            if self.emb_cache is None:
                neg = emb[torch.randint(0, len(emb), (len(batch),))]
            else:
                neg = self.hard_negatives(batch[:, 0])
            pos_logit, neg_logit = (src * dst).sum(1), (src * neg).sum(1)
            loss = nn.functional.softplus(torch.cat([-pos_logit, neg_logit])).mean()
            self.opt.zero_grad()
            loss.backward()  # expect: raises frees
            self.opt.step()
        self.emb_cache = emb
        return loss.item()


nodes = 30
x = torch.randn(nodes, 8)
edges = torch.randint(0, nodes, (48, 2))
adj = torch.zeros(nodes, nodes).index_put_((edges[:, 0], edges[:, 1]), torch.tensor(1.0))
adj = ((adj + adj.t() + torch.eye(nodes)) > 0).float()
adj = adj / adj.sum(1, keepdim=True)
trainer = LinkTrainer(GCN(), x, adj, edges)
for epoch in range(3):
    print(f"epoch {epoch}: {trainer.train_epoch():.4f}")
