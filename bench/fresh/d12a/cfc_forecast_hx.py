# Liquid CfC network forecasting a sensor stream window by window, hidden state handed on (ncps issue #62)
# expect-cause: carried-state
import math
import torch
import torch.nn as nn

torch.manual_seed(0)


class CfCCell(nn.Module):
    def __init__(self, input_size, hidden_size, backbone_units=32):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(input_size + hidden_size, backbone_units), nn.SiLU())
        self.ff1 = nn.Linear(backbone_units, hidden_size)
        self.ff2 = nn.Linear(backbone_units, hidden_size)
        self.time_a = nn.Linear(backbone_units, hidden_size)
        self.time_b = nn.Linear(backbone_units, hidden_size)

    def forward(self, input, hx, ts):
        x = self.backbone(torch.cat([input, hx], 1))
        ff1 = torch.tanh(self.ff1(x))
        ff2 = torch.tanh(self.ff2(x))
        t_interp = torch.sigmoid(self.time_a(x) * ts + self.time_b(x))
        new_hidden = ff1 * (1.0 - t_interp) + t_interp * ff2  # expect: forward
        return new_hidden


class CfC(nn.Module):
    def __init__(self, input_size, units, proj_size):
        super().__init__()
        self.units = units
        self.rnn_cell = CfCCell(input_size, units)
        self.fc = nn.Linear(units, proj_size)

    def forward(self, input, hx=None, timespans=1.0):
        batch_size, seq_len, _ = input.shape
        if hx is None:
            hx = torch.zeros(batch_size, self.units)
        outputs = []
        for t in range(seq_len):
            hx = self.rnn_cell(input[:, t], hx, timespans)
            outputs.append(self.fc(hx))
        return torch.stack(outputs, dim=1), hx


def sensor_stream(n_steps=360, n_features=3):
    t = torch.arange(n_steps, dtype=torch.float32)
    base = torch.stack([torch.sin(t * 0.05 * (k + 1)) for k in range(n_features)], dim=1)
    return base + 0.05 * torch.randn(n_steps, n_features)


series = sensor_stream()
window, horizon, batch = 20, 1, 4
segments = series[: (len(series) // batch) * batch].view(batch, -1, 3)
model = CfC(input_size=3, units=16, proj_size=3)
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
loss_fn = nn.MSELoss()

for epoch in range(2):
    hx = None
    for start in range(0, segments.shape[1] - window - horizon, window):
        x = segments[:, start:start + window]
        y = segments[:, start + horizon:start + window + horizon]
        optimizer.zero_grad()
        y_hat, hx = model(x, hx)
        loss = loss_fn(y_hat, y)
        loss.backward()  # expect: raises frees
        optimizer.step()
    print(f'epoch {epoch} rmse {math.sqrt(loss.item()):.4f}')
