# TimeGAN joint training on synthetic sine sequences (AlanDongMu/TimeGAN_PytorchRebuild issue #2)
# expect-cause: shared-forward
import torch
import torch.nn as nn

torch.manual_seed(0)


class RNNNet(nn.Module):
    def __init__(self, in_dim, hidden_dim, out_dim, num_layer=1):
        super().__init__()
        self.rnn = nn.GRU(in_dim, hidden_dim, num_layer, batch_first=True)
        self.fc = nn.Linear(hidden_dim, out_dim)

    def forward(self, x):
        out, _ = self.rnn(x)
        return torch.sigmoid(self.fc(out))


class TimeGAN:
    def __init__(self, ori_data, hidden_dim=8, batch_size=16, lr=1e-3, gamma=1.0):
        self.ori_data = ori_data
        self.no, self.seq_len, self.z_dim = ori_data.shape
        self.batch_size, self.gamma = batch_size, gamma
        self.embedder = RNNNet(self.z_dim, hidden_dim, hidden_dim)
        self.recovery = RNNNet(hidden_dim, hidden_dim, self.z_dim)
        self.generator = RNNNet(self.z_dim, hidden_dim, hidden_dim)
        self.supervisor = RNNNet(hidden_dim, hidden_dim, hidden_dim)
        self.discriminator = RNNNet(hidden_dim, hidden_dim, 1)
        self.optim_embedder, self.optim_recovery, self.optim_generator, self.optim_supervisor = [
            torch.optim.Adam(net.parameters(), lr=lr) for net in (self.embedder, self.recovery, self.generator, self.supervisor)]
        self.MSELoss, self.BCELoss = nn.MSELoss(), nn.BCELoss()

    def gen_batch(self):
        idx = torch.randperm(self.no)[:self.batch_size]
        self.X = self.ori_data[idx]
        self.Z = torch.rand(self.batch_size, self.seq_len, self.z_dim)

    def batch_forward(self):
        self.H = self.embedder(self.X)
        self.X_tilde = self.recovery(self.H)
        self.H_hat_supervise = self.supervisor(self.H)  # expect: forward
        self.E_hat = self.generator(self.Z)
        self.H_hat = self.supervisor(self.E_hat)
        self.X_hat = self.recovery(self.H_hat)
        self.Y_fake = self.discriminator(self.H_hat)
        self.Y_fake_e = self.discriminator(self.E_hat)

    def train_embedder(self, join_train=False):
        self.optim_embedder.zero_grad(), self.optim_recovery.zero_grad()
        self.E_loss_T0 = self.MSELoss(self.X, self.X_tilde)
        self.E_loss0 = 10 * torch.sqrt(self.E_loss_T0)
        if not join_train:
            self.E_loss0.backward()
        else:
            self.G_loss_S = self.MSELoss(self.H[:, 1:, :], self.H_hat_supervise[:, :-1, :])
            self.E_loss = self.E_loss0 + 0.1 * self.G_loss_S
            self.E_loss.backward()  # expect: raises
        self.optim_embedder.step(), self.optim_recovery.step()

    def train_generator(self, join_train=True):
        self.optim_generator.zero_grad()
        self.optim_supervisor.zero_grad()
        self.G_loss_U = self.BCELoss(self.Y_fake, torch.ones_like(self.Y_fake))
        self.G_loss_U_e = self.BCELoss(self.Y_fake_e, torch.ones_like(self.Y_fake_e))
        self.G_loss_V = torch.mean(torch.abs(self.X_hat.mean(0) - self.X.mean(0)))
        self.G_loss_S = self.MSELoss(self.H_hat_supervise[:, :-1, :], self.H[:, 1:, :])
        self.G_loss = self.G_loss_U + self.gamma * self.G_loss_U_e + torch.sqrt(self.G_loss_S) * 100 + self.G_loss_V * 100
        self.G_loss.backward()  # expect: frees
        self.optim_generator.step()
        self.optim_supervisor.step()


t = torch.linspace(0, 6.28, 12)
ori_data = torch.stack([(torch.sin(t * f + p) + 1) / 2 for f, p in torch.rand(64, 2) * 3], 0).unsqueeze(-1).repeat(1, 1, 3)
model = TimeGAN(ori_data)
for i in range(2):
    model.gen_batch()
    model.batch_forward()
    model.train_embedder()
print('embedding e_loss', model.E_loss_T0.item())
for i in range(2):
    for kk in range(2):
        model.gen_batch()
        model.batch_forward()
        model.train_generator(join_train=True)
        model.train_embedder(join_train=True)
    print('step', i, 'g_loss', model.G_loss.item(), 'e_loss', model.E_loss.item())
