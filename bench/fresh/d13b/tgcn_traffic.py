# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class GraphConv(nn.Module):
    def __init__(self, in_feats, out_feats):
        super().__init__()
        self.linear = nn.Linear(in_feats, out_feats)

    def forward(self, adj, h):
        return adj @ self.linear(h)


class TGCN(nn.Module):
    def __init__(self, in_feats, out_feats):
        super().__init__()
        self.conv_z = GraphConv(in_feats, out_feats)
        self.linear_z = nn.Linear(2 * out_feats, out_feats)
        self.conv_r = GraphConv(in_feats, out_feats)
        self.linear_r = nn.Linear(2 * out_feats, out_feats)
        self.conv_h = GraphConv(in_feats, out_feats)
        self.linear_h = nn.Linear(2 * out_feats, out_feats)

    def forward(self, adj, X, H):
        Z = torch.sigmoid(self.linear_z(torch.cat([self.conv_z(adj, X), H], dim=1)))
        R = torch.sigmoid(self.linear_r(torch.cat([self.conv_r(adj, X), H], dim=1)))
        H_tilde = torch.tanh(self.linear_h(torch.cat([self.conv_h(adj, X), H * R], dim=1)))
        return Z * H + (1 - Z) * H_tilde  # expect: forward


class TrafficForecaster(nn.Module):
    def __init__(self, node_features, hidden):
        super().__init__()
        self.temporal = TGCN(node_features, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, adj, x, h):
        h = self.temporal(adj, x, h)
        return self.linear(F.relu(h)), h


num_nodes, node_features, hidden, num_timestamps = 20, 4, 16, 12
adj = torch.rand(num_nodes, num_nodes)
adj = adj / adj.sum(1, keepdim=True)
features = [torch.randn(num_nodes, node_features) for _ in range(num_timestamps)]
targets = [torch.randn(num_nodes, 1) for _ in range(num_timestamps)]

model = TrafficForecaster(node_features, hidden)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

hidden_state = torch.zeros(num_nodes, hidden)
for epoch in range(5):
    cost = 0
    for t in range(num_timestamps):
        y_hat, hidden_state = model(adj, features[t], hidden_state)
        cost = cost + torch.mean((y_hat - targets[t]) ** 2)
    cost = cost / num_timestamps
    cost.backward()  # expect: raises frees
    optimizer.step()
    optimizer.zero_grad()
    print(f"epoch {epoch} | MSE {cost.item():.4f}")
