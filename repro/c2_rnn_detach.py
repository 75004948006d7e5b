import torch
from torch import nn

torch.manual_seed(0)
rnn, head = nn.RNNCell(2, 4), nn.Linear(4, 1)
opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.05)
xs, ys = torch.randn(4, 1, 2), torch.randn(4, 1, 1)
h = torch.zeros(1, 4)
for step in range(1, 5):
    opt.zero_grad()
    h = rnn(xs[step - 1], h)
    loss = nn.functional.mse_loss(head(h), ys[step - 1])
    loss.backward()
    opt.step()
    h = h.detach() if torch.is_tensor(h) else tuple(t.detach() for t in h)
    print("step", step, "loss", round(loss.item(), 4))
