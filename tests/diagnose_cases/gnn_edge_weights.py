"""A graph network whose normalised adjacency is built once, before the loop, from learned weights.

Rebuilt from the structure of issue-tracker reports against GNN code with learnable edge
weights: `norm_adj = normalize(sigmoid(edge_logits) * mask)` is computed once outside the
training loop to save time, and every epoch's forward multiplies by it. The edge logits are in
the optimizer, so detaching `norm_adj` would silently stop them training; the fix: build
`norm_adj` inside the loop, from the current edge weights.
"""

# expect-cause: carried-state
# expect-where: before the loop
# expect-fix: norm_adj
# expect-fix: inside the loop
# expect-not-fix: detach
import torch
from torch import nn

torch.manual_seed(0)


class GCN(nn.Module):
    def __init__(self, nodes, features, classes):
        super().__init__()
        self.edge_logits = nn.Parameter(torch.zeros(nodes, nodes))
        self.layer1 = nn.Linear(features, 16)
        self.layer2 = nn.Linear(16, classes)

    def adjacency(self, mask):
        weighted = torch.sigmoid(self.edge_logits) * mask
        degree = weighted.sum(dim=1, keepdim=True).clamp(min=1e-6)
        return weighted / degree  # expect: forward

    def forward(self, x, norm_adj):
        h = torch.relu(norm_adj @ self.layer1(x))
        return norm_adj @ self.layer2(h)


nodes = 10
mask = (torch.rand(nodes, nodes) < 0.3).float() + torch.eye(nodes)
x, labels = torch.randn(nodes, 6), torch.randint(0, 3, (nodes,))
model = GCN(nodes, 6, 3)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
norm_adj = model.adjacency(mask)
for epoch in range(3):
    loss = nn.functional.cross_entropy(model(x, norm_adj), labels)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"epoch {epoch}: {loss.item():.6f}")
