# expect-cause: none
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def sparsemax_like(z):
    return F.softmax(z * 4.0, dim=-1)


class AttentiveTransformer(nn.Module):
    def __init__(self, n_a, n_features):
        super().__init__()
        self.fc = nn.Linear(n_a, n_features)
        self.bn = nn.BatchNorm1d(n_features)

    def forward(self, priors, processed_feat):
        return sparsemax_like(self.bn(self.fc(processed_feat)) * priors)


class TabNetEncoder(nn.Module):
    def __init__(self, n_features, n_d=8, n_a=8, n_steps=3, gamma=1.3):
        super().__init__()
        self.n_d, self.n_steps, self.gamma = n_d, n_steps, gamma
        self.initial_bn = nn.BatchNorm1d(n_features)
        self.initial_splitter = nn.Linear(n_features, n_d + n_a)
        self.feat_transformers = nn.ModuleList([nn.Linear(n_features, n_d + n_a) for _ in range(n_steps)])
        self.att_transformers = nn.ModuleList([AttentiveTransformer(n_a, n_features) for _ in range(n_steps)])
        self.register_buffer("feature_importances", torch.zeros(n_features))

    def forward(self, x):
        x = self.initial_bn(x)
        prior = torch.ones_like(x)
        M_loss = 0
        att = self.initial_splitter(x)[:, self.n_d:]
        steps_output = []
        for step in range(self.n_steps):
            M = self.att_transformers[step](prior, att)
            M_loss = M_loss + torch.mean(torch.sum(M * torch.log(M + 1e-15), dim=1))
            prior = torch.mul(self.gamma - M, prior)
            out = F.relu(self.feat_transformers[step](M * x))
            steps_output.append(out[:, :self.n_d])
            att = out[:, self.n_d:]
            with torch.no_grad():
                self.feature_importances.mul_(0.99).add_(0.01 * M.mean(0))
        return torch.stack(steps_output).sum(0), M_loss / self.n_steps


class TabNetClassifier(nn.Module):
    def __init__(self, n_features, n_classes):
        super().__init__()
        self.encoder = TabNetEncoder(n_features)
        self.final_mapping = nn.Linear(8, n_classes)

    def forward(self, x):
        res, M_loss = self.encoder(x)
        return self.final_mapping(res), M_loss


X, y = torch.randn(512, 12), torch.randint(0, 3, (512,))
network = TabNetClassifier(12, 3)
optimizer = torch.optim.Adam(network.parameters(), lr=2e-2)
lambda_sparse = 1e-3
for epoch in range(3):
    for idx in torch.randperm(512).split(64):
        output, M_loss = network(X[idx])
        loss = F.cross_entropy(output, y[idx]) - lambda_sparse * M_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
print("feature importances", network.encoder.feature_importances[:4])
