# expect-cause: carried-state
import torch
import torch.nn.functional as F
from torch.nn import LSTM

torch.manual_seed(0)


def gcn_norm(edge_index, edge_weight, num_nodes):
    adj = torch.zeros(num_nodes, num_nodes)
    adj[edge_index[0], edge_index[1]] = edge_weight
    adj = adj + torch.eye(num_nodes)
    deg_inv_sqrt = adj.sum(1).pow(-0.5)
    return deg_inv_sqrt[:, None] * adj * deg_inv_sqrt[None, :]


class GCNConv_Fixed_W(torch.nn.Module):
    def forward(self, W, x, edge_index, edge_weight):
        return gcn_norm(edge_index, edge_weight, x.size(0)) @ (x @ W)


class EvolveGCNO(torch.nn.Module):
    def __init__(self, in_channels):
        super().__init__()
        self.in_channels = in_channels
        self.weight = None
        self.initial_weight = torch.nn.Parameter(torch.empty(1, in_channels, in_channels))
        self.recurrent_layer = LSTM(input_size=in_channels, hidden_size=in_channels, num_layers=1)
        self.conv_layer = GCNConv_Fixed_W()
        torch.nn.init.xavier_uniform_(self.initial_weight)

    def reinitialize_weight(self):
        self.weight = None

    def forward(self, X, edge_index, edge_weight=None):
        if self.weight is None:
            _, (self.weight, _) = self.recurrent_layer(self.initial_weight, (self.initial_weight, self.initial_weight))
        else:
            _, (self.weight, _) = self.recurrent_layer(self.weight, (self.weight, self.weight))  # expect: forward
        return self.conv_layer(self.weight.squeeze(dim=0), X, edge_index, edge_weight)


class RecurrentGCN(torch.nn.Module):
    def __init__(self, node_features):
        super().__init__()
        self.recurrent = EvolveGCNO(node_features)
        self.linear = torch.nn.Linear(node_features, 1)

    def forward(self, x, edge_index, edge_weight):
        h = self.recurrent(x, edge_index, edge_weight)
        return self.linear(F.relu(h))


class Snapshot:
    def __init__(self, num_nodes=20, num_edges=60, node_features=4):
        self.x = torch.randn(num_nodes, node_features)
        self.edge_index = torch.randint(0, num_nodes, (2, num_edges))
        self.edge_attr = torch.rand(num_edges)
        self.y = self.x.sum(1, keepdim=True) * 0.5 + 0.1 * torch.randn(num_nodes, 1)


train_dataset = [Snapshot() for _ in range(8)]
model = RecurrentGCN(node_features=4)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

model.train()
for epoch in range(5):
    cost = 0
    for time, snapshot in enumerate(train_dataset):
        y_hat = model(snapshot.x, snapshot.edge_index, snapshot.edge_attr)
        cost = cost + torch.mean((y_hat - snapshot.y) ** 2)
    cost = cost / (time + 1)
    cost.backward()  # expect: raises frees
    optimizer.step()
    optimizer.zero_grad()
    print(f"epoch {epoch} MSE {cost.item():.4f}")
