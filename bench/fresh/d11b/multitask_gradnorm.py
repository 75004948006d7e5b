# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
DIM_IN, DIM_OUT, NUM_TASKS = 25, 10, 2


class MTLNet(nn.Module):
    """Shared trunk + one head per task; forward returns the vector of task losses."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(DIM_IN, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, 64)
        self.heads = nn.ModuleList([nn.Linear(64, DIM_OUT) for _ in range(NUM_TASKS)])

    def forward(self, x, *ys):
        h = F.relu(self.fc3(F.relu(self.fc2(F.relu(self.fc1(x))))))
        return torch.stack([F.mse_loss(head(h), y) for head, y in zip(self.heads, ys)])  # expect: forward


def toy_dataset(num_data=512, scalars=(1.0, 10.0)):
    B = torch.randn(DIM_OUT, DIM_IN) * 10 ** 0.5
    x = torch.randn(num_data, DIM_IN)
    ys = [s * torch.tanh(x @ (B + torch.randn(DIM_OUT, DIM_IN) * 3.5 ** 0.5).T) for s in scalars]
    return [(x[i:i + 64], *[y[i:i + 64] for y in ys]) for i in range(0, num_data, 64)]


def gradNorm(net, layer, alpha, dataloader, num_epochs, lr):
    optimizer1 = torch.optim.Adam(net.parameters(), lr=lr)
    iters = 0
    net.train()
    for epoch in range(num_epochs):
        for data in dataloader:
            loss = net(*data)
            if iters == 0:
                weights = torch.ones_like(loss)
                weights = torch.nn.Parameter(weights / weights.sum())
                T = weights.sum().detach()
                optimizer2 = torch.optim.Adam([weights], lr=lr)
                l0 = loss.detach()
            weighted_loss = weights @ loss
            optimizer1.zero_grad()
            weighted_loss.backward()  # expect: frees
            gw = []
            for i in range(len(loss)):
                dl = torch.autograd.grad(weights[i] * loss[i], layer.parameters(), retain_graph=True, create_graph=True)[0]  # expect: raises
                gw.append(torch.norm(dl))
            gw = torch.stack(gw)
            loss_ratio = loss.detach() / l0
            rt = loss_ratio / loss_ratio.mean()
            gw_avg = gw.mean().detach()
            constant = (gw_avg * rt ** alpha).detach()
            gradnorm_loss = torch.abs(gw - constant).sum()
            optimizer2.zero_grad()
            gradnorm_loss.backward()
            optimizer1.step()
            optimizer2.step()
            weights = (weights / weights.sum() * T).detach()
            weights = torch.nn.Parameter(weights)
            optimizer2 = torch.optim.Adam([weights], lr=lr)
            iters += 1
        print(f"epoch {epoch} task losses {[round(v, 4) for v in loss.tolist()]} weights {weights.tolist()}")


net = MTLNet()
gradNorm(net, net.fc3, alpha=0.12, dataloader=toy_dataset(), num_epochs=2, lr=1e-3)
