# expect-cause: none
import torch
import torch.nn as nn

torch.manual_seed(0)


class StreamingAnomalyDetector(nn.Module):
    def __init__(self, n_sensors=6, hidden=32):
        super().__init__()
        self.lstm = nn.LSTM(n_sensors, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_sensors)

    def forward(self, window, state):
        out, state = self.lstm(window, state)
        return self.head(out), state


def stream(n_chunks=12, chunk_len=20, n_sensors=6):
    t = torch.arange(n_chunks * chunk_len, dtype=torch.float32)
    signal = torch.stack([torch.sin(t / (5 + k)) for k in range(n_sensors)], 1)
    signal = signal + 0.05 * torch.randn_like(signal)
    for i in range(n_chunks):
        yield signal[i * chunk_len:(i + 1) * chunk_len].unsqueeze(0)


model = StreamingAnomalyDetector()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
criterion = nn.MSELoss()

for epoch in range(3):
    state = None
    total = 0.0
    for chunk in stream():
        inputs, targets = chunk[:, :-1], chunk[:, 1:]
        if state is not None:
            state = tuple(s.detach() for s in state)
        preds, state = model(inputs, state)
        loss = criterion(preds, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch} mean next-step error {total / 12:.4f}")
