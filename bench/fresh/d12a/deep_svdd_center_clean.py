# One-class Deep SVDD: hypersphere center computed once before training (lukasruff/Deep-SVDD-PyTorch trainer style)
# expect-cause: none
import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self, rep_dim=8):
        super().__init__()
        self.rep_dim = rep_dim
        self.conv = nn.Sequential(nn.Conv1d(1, 8, 5, bias=False, padding=2), nn.LeakyReLU(), nn.MaxPool1d(2))
        self.fc = nn.Linear(8 * 16, rep_dim, bias=False)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


class DeepSVDDTrainer:
    def __init__(self, nu=0.1, lr=1e-3, n_epochs=3, eps=0.1):
        self.nu, self.lr, self.n_epochs, self.eps = nu, lr, n_epochs, eps
        self.c = None

    def init_center_c(self, train_loader, net):
        n_samples = 0
        c = torch.zeros(net.rep_dim)
        net.eval()
        with torch.no_grad():
            for inputs in train_loader:
                outputs = net(inputs)
                n_samples += outputs.shape[0]
                c += torch.sum(outputs, dim=0)
        c /= n_samples
        c[(abs(c) < self.eps) & (c < 0)] = -self.eps
        c[(abs(c) < self.eps) & (c > 0)] = self.eps
        return c

    def train(self, train_loader, net):
        optimizer = torch.optim.Adam(net.parameters(), lr=self.lr, weight_decay=1e-6)
        if self.c is None:
            self.c = self.init_center_c(train_loader, net)
        net.train()
        for epoch in range(self.n_epochs):
            loss_epoch, n_batches = 0.0, 0
            for inputs in train_loader:
                optimizer.zero_grad()
                outputs = net(inputs)
                dist = torch.sum((outputs - self.c) ** 2, dim=1)
                loss = torch.mean(dist)
                loss.backward()
                optimizer.step()
                loss_epoch += loss.item()
                n_batches += 1
            print('Epoch {}/{}\t Loss: {:.6f}'.format(epoch + 1, self.n_epochs, loss_epoch / n_batches))
        return net

    def test(self, test_x, net):
        net.eval()
        with torch.no_grad():
            return torch.sum((net(test_x) - self.c) ** 2, dim=1)


t = torch.linspace(0, 6.28, 32)
normal = torch.sin(t + torch.rand(192, 1) * 6.28).unsqueeze(1) + 0.05 * torch.randn(192, 1, 32)
train_loader = [normal[i:i + 32] for i in range(0, 192, 32)]
trainer = DeepSVDDTrainer()
net = trainer.train(train_loader, Net())
anomalies = torch.randn(16, 1, 32)
print('normal score', trainer.test(normal[:16], net).mean().item(), 'anomaly score', trainer.test(anomalies, net).mean().item())
