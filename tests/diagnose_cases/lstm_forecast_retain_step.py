"""An LSTM price forecaster whose carried (h, c) state was "fixed" with retain_graph=True.

Rebuilt from the structure of the forum threads where a stock-price LSTM trained window by
window carries `hidden` across windows, hits "backward through the graph a second time", and
the reader adds `retain_graph=True` as the message suggests. The next window's backward now
runs into the previous window's kept nn.LSTM graph, whose saved weights `optimizer.step()`
changed in place: "one of the variables needed for gradient computation has been modified by an
inplace operation". The fix is the original cause's: detach both tensors of the state after
each window, `hidden = tuple(s.detach() for s in hidden)`, and drop retain_graph.
"""

# expect-cause: inplace-after-retain
# expect-fix: detach
# expect-fix: hidden
import torch
from torch import nn

torch.manual_seed(0)


class PriceLSTM(nn.Module):
    def __init__(self, features=5, hidden=32, layers=2):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True, dropout=0.1)
        self.fc = nn.Sequential(nn.Linear(hidden, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x, hidden):
        out, hidden = self.lstm(x, hidden)  # expect: forward
        return self.fc(out[:, -1, :]), hidden


prices = torch.randn(4, 121, 5).cumsum(dim=1) * 0.05
model = PriceLSTM()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
hidden = (torch.zeros(2, 4, 32), torch.zeros(2, 4, 32))
for epoch in range(2):
    for start in range(0, 100, 20):
        x, y = prices[:, start : start + 20], prices[:, start + 20, :1]
        pred, hidden = model(x, hidden)
        loss = nn.functional.mse_loss(pred, y)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)  # expect: kept raises
        optimizer.step()  # expect: changed
    print(f"epoch {epoch}: {loss.item():.5f}")
