# Classifier on autoencoder-encoded tabular features; encoding done once under no_grad as in the accepted answer
# (devgem.io "Understanding PyTorch's RuntimeError: Backward Through the Graph a Second Time", Stack Overflow question)
# expect-cause: none
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class AutoEncoder(nn.Module):
    def __init__(self, n_in, n_code):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_in, 32), nn.ReLU(), nn.Linear(32, n_code))
        self.decoder = nn.Sequential(nn.Linear(n_code, 32), nn.ReLU(), nn.Linear(32, n_in))

    def forward(self, x):
        code = self.encoder(x)
        return code, F.mse_loss(self.decoder(code), x)


class Classifier(nn.Module):
    def __init__(self, n_code, n_classes=2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_code, 16), nn.ReLU(), nn.Linear(16, n_classes))

    def forward(self, x, y=None):
        out = self.net(x)
        loss = F.cross_entropy(out, y) if y is not None else None
        accuracy = (out.argmax(1) == y).float().mean() if y is not None else None
        return out, loss, accuracy


X_train_tensor = torch.randn(512, 24)
y_train_tensor = (X_train_tensor[:, :3].sum(1) > 0).long()
X_val_tensor = torch.randn(128, 24)

autoencoder = AutoEncoder(24, 8)
ae_opt = torch.optim.Adam(autoencoder.parameters(), lr=1e-2)
for it in range(30):
    _, rec = autoencoder(X_train_tensor)
    ae_opt.zero_grad()
    rec.backward()
    ae_opt.step()

autoencoder.eval()
with torch.no_grad():
    X_train_encoded, loss = autoencoder(X_train_tensor)
    X_val_encoded, loss = autoencoder(X_val_tensor)

model = Classifier(8)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
max_iters, batch_size = 3, 64
for iter in range(max_iters):
    start_ix = 0
    loss = None
    while start_ix < len(X_train_encoded):
        end_ix = min(start_ix + batch_size, len(X_train_encoded))
        out, loss, accuracy = model(X_train_encoded[start_ix:end_ix], y_train_tensor[start_ix:end_ix])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        start_ix = end_ix
    print(iter, loss.item(), accuracy.item())
