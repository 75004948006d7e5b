# Fine-tuning a streaming voice-activity detector on labelled chunks (silero-vad tuning style)
# expect-cause: carried-state
import torch
import torch.nn as nn

torch.manual_seed(0)
NUM_SAMPLES = 256
CONTEXT = 32


class StreamingVAD(nn.Module):
    def __init__(self, n_fft=64, hidden=32):
        super().__init__()
        self.stft = nn.Conv1d(1, n_fft, kernel_size=n_fft, stride=n_fft // 2)
        self.encoder = nn.Sequential(nn.Conv1d(n_fft, hidden, 3, padding=1), nn.ReLU())
        self.decoder_rnn = nn.LSTMCell(hidden, hidden)
        self.decoder_out = nn.Linear(hidden, 1)
        self.reset_states()

    def reset_states(self, batch_size=1):
        self._state = None
        self._context = torch.zeros(0)
        self._last_batch_size = 0

    def forward(self, x):
        batch_size = x.shape[0]
        if not self._last_batch_size:
            self.reset_states(batch_size)
        if not len(self._context):
            self._context = torch.zeros(batch_size, CONTEXT)
        x = torch.cat([self._context, x], dim=1)
        feats = self.encoder(self.stft(x.unsqueeze(1))).mean(-1)
        if self._state is None:
            self._state = (torch.zeros_like(feats), torch.zeros_like(feats))
        h, c = self.decoder_rnn(feats, self._state)  # expect: forward
        self._state = (h, c)
        self._context = x[..., -CONTEXT:]
        self._last_batch_size = batch_size
        return torch.sigmoid(self.decoder_out(h)).squeeze(-1)


def make_loader(n_batches=3, batch_size=8, n_chunks=6):
    for _ in range(n_batches):
        wavs = torch.randn(batch_size, n_chunks * NUM_SAMPLES) * 0.1
        targets = (torch.rand(batch_size, n_chunks) > 0.5).float()
        wavs[targets.repeat_interleave(NUM_SAMPLES, dim=1) > 0] *= 8
        yield wavs, targets


def train(model, loader, optimizer, criterion):
    model.train()
    total = 0.0
    for i, (wavs, targets) in enumerate(loader):
        outs = []
        for j in range(0, wavs.shape[1], NUM_SAMPLES):
            chunk = wavs[:, j:j + NUM_SAMPLES]
            outs.append(model(chunk))
        stacked = torch.stack(outs, dim=1)
        loss = criterion(stacked, targets)
        optimizer.zero_grad()
        loss.backward()  # expect: raises frees
        optimizer.step()
        total += loss.item()
    return total


model = StreamingVAD()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
criterion = nn.BCELoss()
for epoch in range(2):
    print('epoch', epoch, 'loss', train(model, make_loader(), optimizer, criterion))
