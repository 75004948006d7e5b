"""A GRU seq2seq trainer that steps after every decoder token, kept going with retain_graph=True.

Rebuilt from the structure of forum reports derived from the seq2seq translation tutorial: the
reader moved `loss.backward()` and `optimizer.step()` into the decoder's time loop ("update on
every token"), hit "backward through the graph a second time" on the second token (its graph
runs back through the first token's decoder step and the encoder), and added retain_graph=True.
Now the second token's backward reaches the first token's nn.GRU step, whose saved weights the
first `step()` changed in place: "modified by an inplace operation". The fix, as the tutorial
has it: add the per-token losses and call backward once per sentence, then step once, without
retain_graph.
"""

# expect-cause: inplace-after-retain
# expect-fix: once
# expect-not-fix: retain_graph=True
import torch
from torch import nn

torch.manual_seed(0)


class EncoderRNN(nn.Module):
    def __init__(self, vocab=25, size=16):
        super().__init__()
        self.embedding = nn.Embedding(vocab, size)
        self.gru = nn.GRU(size, size, batch_first=True)

    def forward(self, src):
        return self.gru(self.embedding(src))


class DecoderRNN(nn.Module):
    def __init__(self, vocab=25, size=16):
        super().__init__()
        self.embedding = nn.Embedding(vocab, size)
        self.gru = nn.GRU(size, size, batch_first=True)
        self.out = nn.Linear(size, vocab)

    def forward(self, token, hidden):
        output, hidden = self.gru(torch.relu(self.embedding(token)), hidden)  # expect: forward
        return nn.functional.log_softmax(self.out(output[:, 0]), dim=-1), hidden


encoder, decoder = EncoderRNN(), DecoderRNN()
enc_opt = torch.optim.SGD(encoder.parameters(), lr=0.01)
dec_opt = torch.optim.SGD(decoder.parameters(), lr=0.01)
criterion = nn.NLLLoss()
pairs = [(torch.randint(2, 25, (1, 7)), torch.randint(2, 25, (1, 5))) for _ in range(3)]
for src, tgt in pairs:
    _, hidden = encoder(src)
    token = torch.zeros(1, 1, dtype=torch.long)
    for t in range(tgt.size(1)):
        log_probs, hidden = decoder(token, hidden)
        loss = criterion(log_probs, tgt[:, t])
        enc_opt.zero_grad()
        dec_opt.zero_grad()
        loss.backward(retain_graph=True)  # expect: kept raises
        enc_opt.step()
        dec_opt.step()  # expect: changed
        token = tgt[:, t : t + 1]
    print(f"last token loss {loss.item():.4f}")
