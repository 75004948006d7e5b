# expect-cause: carried-state
import math

import torch
from torch import nn

torch.manual_seed(0)

# Hyper Parameters
TIME_STEP = 10      # rnn time step
INPUT_SIZE = 1      # rnn input size
LR = 0.02           # learning rate


class RNN(nn.Module):
    def __init__(self):
        super(RNN, self).__init__()

        self.rnn = nn.RNN(
            input_size=INPUT_SIZE,
            hidden_size=32,     # rnn hidden unit
            num_layers=1,       # number of rnn layer
            batch_first=True,   # input & output will has batch size as 1s dimension. e.g. (batch, time_step, input_size)
        )
        self.out = nn.Linear(32, 1)

    def forward(self, x, h_state):
        # x (batch, time_step, input_size)
        # h_state (n_layers, batch, hidden_size)
        # r_out (batch, time_step, hidden_size)
        r_out, h_state = self.rnn(x, h_state)  # expect: forward

        outs = []    # save all predictions
        for time_step in range(r_out.size(1)):    # calculate output for each time step
            outs.append(self.out(r_out[:, time_step, :]))
        return torch.stack(outs, dim=1), h_state


rnn = RNN()
print(rnn)

optimizer = torch.optim.Adam(rnn.parameters(), lr=LR)   # optimize all cnn parameters
loss_func = nn.MSELoss()

h_state = None      # for initial hidden state

for step in range(100):
    start, end = step * math.pi, (step + 1) * math.pi   # time range
    # use sin predicts cos
    steps = torch.linspace(start, end, TIME_STEP, dtype=torch.float32)
    x_np = torch.sin(steps)
    y_np = torch.cos(steps)

    x = x_np[None, :, None]    # shape (batch, time_step, input_size)
    y = y_np[None, :, None]

    prediction, h_state = rnn(x, h_state)   # rnn output
    # !! next step is important !!

    loss = loss_func(prediction, y)         # calculate loss
    optimizer.zero_grad()                   # clear gradients for this training step
    loss.backward()                         # expect: raises frees
    optimizer.step()                        # apply gradients

    if step % 20 == 0:
        print('step', step, 'loss %.4f' % loss.item())
