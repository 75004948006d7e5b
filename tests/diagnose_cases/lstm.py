"""An LSTM language model that carries its state across batches, detaching only h."""

# expect-cause: carried-state
import torch
from torch import nn

torch.manual_seed(0)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.head = nn.Linear(16, 20)

    def forward(self, tokens, state):
        out, state = self.lstm(self.embed(tokens), state)  # expect: forward
        return self.head(out), state


model = Model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randint(0, 20, (4, 40))
state = (torch.zeros(1, 4, 16), torch.zeros(1, 4, 16))
for start in range(0, 30, 10):
    tokens, targets = data[:, start : start + 10], data[:, start + 1 : start + 11]
    logits, state = model(tokens, state)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 20), targets.reshape(-1))
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    state = (state[0].detach(), state[1])  # c still carries the previous batch's graph
    print(f"{loss.item():.6f}")
