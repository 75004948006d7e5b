# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
N_SYMBOLS, EMB, N_MELS, ATT_RNN, ATT_DIM = 30, 32, 20, 48, 24


class LocationSensitiveAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.query_layer = nn.Linear(ATT_RNN, ATT_DIM, bias=False)
        self.memory_layer = nn.Linear(EMB, ATT_DIM, bias=False)
        self.location_conv = nn.Conv1d(2, 8, kernel_size=5, padding=2, bias=False)
        self.location_dense = nn.Linear(8, ATT_DIM, bias=False)
        self.v = nn.Linear(ATT_DIM, 1, bias=False)

    def forward(self, query, memory, weights_cat):
        loc = self.location_dense(self.location_conv(weights_cat).transpose(1, 2))
        energies = self.v(torch.tanh(self.query_layer(query).unsqueeze(1) + self.memory_layer(memory) + loc))
        weights = F.softmax(energies.squeeze(-1), dim=1)
        return torch.bmm(weights.unsqueeze(1), memory).squeeze(1), weights


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.prenet = nn.Sequential(nn.Linear(N_MELS, 32), nn.ReLU())
        self.attention_rnn = nn.LSTMCell(32 + EMB, ATT_RNN)
        self.attention_layer = LocationSensitiveAttention()
        self.linear_projection, self.gate_layer = nn.Linear(ATT_RNN + EMB, N_MELS), nn.Linear(ATT_RNN + EMB, 1)
        self.attention_hidden = None

    def initialize_decoder_states(self, memory):
        B, T, _ = memory.shape
        if self.attention_hidden is None:
            self.attention_hidden = memory.new_zeros(B, ATT_RNN)
            self.attention_cell = memory.new_zeros(B, ATT_RNN)
        self.attention_weights = memory.new_zeros(B, T)
        self.attention_weights_cum = memory.new_zeros(B, T)
        self.attention_context = memory.new_zeros(B, EMB)

    def decode(self, decoder_input, memory):
        cell_input = torch.cat((decoder_input, self.attention_context), -1)
        self.attention_hidden, self.attention_cell = self.attention_rnn(cell_input, (self.attention_hidden, self.attention_cell))  # expect: forward
        weights_cat = torch.stack((self.attention_weights, self.attention_weights_cum), dim=1)
        self.attention_context, self.attention_weights = self.attention_layer(self.attention_hidden, memory, weights_cat)
        self.attention_weights_cum = self.attention_weights_cum + self.attention_weights
        out = torch.cat((self.attention_hidden, self.attention_context), dim=1)
        return self.linear_projection(out), self.gate_layer(out)

    def forward(self, memory, mel_targets):
        self.initialize_decoder_states(memory)
        decoder_input = memory.new_zeros(memory.shape[0], N_MELS)
        mel_outputs, gate_outputs = [], []
        for t in range(mel_targets.shape[1]):
            mel, gate = self.decode(self.prenet(decoder_input), memory)
            mel_outputs.append(mel)
            gate_outputs.append(gate.squeeze(1))
            decoder_input = mel_targets[:, t]
        return torch.stack(mel_outputs, 1), torch.stack(gate_outputs, 1)


class Tacotron2(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding, self.encoder, self.decoder = nn.Embedding(N_SYMBOLS, EMB), nn.Linear(EMB, EMB), Decoder()

    def forward(self, text, mels):
        return self.decoder(torch.tanh(self.encoder(self.embedding(text))), mels)


def batches(n=4, B=4):
    for _ in range(n):
        mel_len = torch.randint(6, 10, ()).item()
        gate = (torch.arange(mel_len) == mel_len - 1).float().expand(B, mel_len)
        yield torch.randint(0, N_SYMBOLS, (B, 12)), torch.randn(B, mel_len, N_MELS), gate


model = Tacotron2()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for iteration, (text, mel_padded, gate_padded) in enumerate(batches()):
    mel_out, gate_out = model(text, mel_padded)
    optimizer.zero_grad()
    loss = F.mse_loss(mel_out, mel_padded) + F.binary_cross_entropy_with_logits(gate_out, gate_padded)
    loss.backward()  # expect: raises frees
    optimizer.step()
    print(f"iteration {iteration} loss {loss.item():.4f}")
