# expect-cause: carried-state
import torch
import torch.nn as nn

torch.manual_seed(0)
N_ITEMS, HIDDEN, BATCH = 50, 32, 8


class GRU4REC(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, batch_size):
        super().__init__()
        self.hidden_size, self.batch_size = hidden_size, batch_size
        self.look_up = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, num_layers=1)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.final_activation = nn.Tanh()

    def forward(self, input, hidden):
        embedded = self.look_up(input).unsqueeze(0)
        output, hidden = self.gru(embedded, hidden)  # expect: forward
        logit = self.final_activation(self.h2o(output.view(-1, output.size(-1))))
        return logit, hidden

    def init_hidden(self):
        return torch.zeros(1, self.batch_size, self.hidden_size)


class TOP1Loss(nn.Module):
    def forward(self, logit):
        diff = -(logit.diag().view(-1, 1).expand_as(logit) - logit)
        return torch.sigmoid(diff).mean() + torch.sigmoid(logit ** 2).mean()


def session_parallel_loader(sessions, batch_size):
    """Yields (input, target, mask) like GRU4Rec's session-parallel mini-batches."""
    iters = list(range(batch_size))
    pos = [0] * batch_size
    next_session = batch_size
    mask = []
    while True:
        inp = torch.tensor([sessions[s][p] for s, p in zip(iters, pos)])
        tgt = torch.tensor([sessions[s][p + 1] for s, p in zip(iters, pos)])
        yield inp, tgt, mask
        mask = []
        for i in range(batch_size):
            pos[i] += 1
            if pos[i] + 1 >= len(sessions[iters[i]]):
                if next_session >= len(sessions):
                    return
                iters[i], pos[i] = next_session, 0
                next_session += 1
                mask.append(i)


class Trainer:
    def __init__(self, model, train_data, optim, loss_func):
        self.model, self.train_data, self.optim, self.loss_func = model, train_data, optim, loss_func

    def train_epoch(self, epoch):
        losses = []

        def reset_hidden(hidden, mask):
            if len(mask) != 0:
                hidden[:, mask, :] = 0
            return hidden

        hidden = self.model.init_hidden()
        for ii, (input, target, mask) in enumerate(session_parallel_loader(self.train_data, BATCH)):
            self.optim.zero_grad()
            hidden = reset_hidden(hidden, mask)
            logit, hidden = self.model(input, hidden)
            loss = self.loss_func(logit[:, target.view(-1)])
            losses.append(loss.item())
            loss.backward()  # expect: raises frees
            self.optim.step()
        return sum(losses) / len(losses)


sessions = [torch.randint(0, N_ITEMS, (int(torch.randint(2, 7, (1,))),)).tolist() for _ in range(40)]
model = GRU4REC(N_ITEMS, HIDDEN, N_ITEMS, BATCH)
trainer = Trainer(model, sessions, torch.optim.Adagrad(model.parameters(), lr=0.05), TOP1Loss())
for epoch in range(3):
    print(f"epoch {epoch} loss {trainer.train_epoch(epoch):.4f}")
