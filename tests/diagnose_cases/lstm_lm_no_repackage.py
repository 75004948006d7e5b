"""A word-level LSTM language model whose (h, c) state is never repackaged between BPTT chunks.

Rebuilt from the structure of forum reports on the word_language_model example: the data is
batchified into columns, `get_batch` cuts BPTT chunks, `init_hidden` runs once per epoch and the
reader dropped the example's `hidden = repackage_hidden(hidden)` line ("it only saves memory").
The second chunk's forward starts from the (h, c) pair the first chunk's nn.LSTM returned, so its
backward runs into the first chunk's graph, which the first backward freed. The fix: detach both
tensors of the pair before each chunk, `hidden = tuple(s.detach() for s in hidden)`.
"""

# expect-cause: carried-state
# expect-fix: detach
# expect-fix: both
import torch
from torch import nn

torch.manual_seed(0)


class RNNModel(nn.Module):
    def __init__(self, ntoken=40, ninp=16, nhid=24, nlayers=2, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid

    def forward(self, tokens, hidden):
        emb = self.drop(self.encoder(tokens))
        output, hidden = self.rnn(emb, hidden)  # expect: forward
        return self.decoder(self.drop(output)), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),) * 2


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data[: nbatch * bsz].view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt=8):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)


model = RNNModel()
criterion = nn.NLLLoss()
train_data = batchify(torch.randint(0, 40, (200,)), 5)
lr = 5.0
for epoch in range(2):
    model.train()
    hidden = model.init_hidden(5)
    for i in range(0, train_data.size(0) - 1, 8):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(nn.functional.log_softmax(output, dim=-1).view(-1, 40), targets)
        loss.backward()  # expect: raises frees
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        print(f"epoch {epoch} batch {i}: {loss.item():.4f}")
