# expect-cause: carried-state
import math
import torch
import torch.nn as nn

torch.manual_seed(0)


class LSTMmodel(nn.Module):

    def __init__(self, input_size, hidden_size_1, hidden_size_2, out_size):
        super().__init__()
        self.hidden_size_1 = hidden_size_1
        self.hidden_size_2 = hidden_size_2
        self.input_size = input_size
        self.lstm_1 = nn.LSTM(input_size, hidden_size_1)
        self.lstm_2 = nn.LSTM(hidden_size_1, hidden_size_2)
        self.linear = nn.Linear(hidden_size_2, out_size)
        self.hidden_1 = (torch.zeros(1, 1, hidden_size_1), torch.zeros(1, 1, hidden_size_1))
        self.hidden_2 = (torch.zeros(1, 1, hidden_size_2), torch.zeros(1, 1, hidden_size_2))

    def forward(self, seq):
        lstm_out_1, self.hidden_1 = self.lstm_1(seq.view(-1, 1, self.input_size), self.hidden_1)
        lstm_out_2, self.hidden_2 = self.lstm_2(lstm_out_1, self.hidden_2)  # expect: forward
        pred = self.linear(lstm_out_2.view(len(seq), -1))
        return pred


def pendulum(theta0, steps=18, dt=0.05, g=9.81, length=1.0):
    theta, omega, out = theta0, 0.0, []
    for _ in range(steps):
        omega -= g / length * math.sin(theta) * dt
        theta += omega * dt
        out.append([theta, omega])
    return torch.tensor(out)


data = [pendulum(0.5), pendulum(1.0)]
window = 10
training_data = []
for traj in data:
    for i in range(len(traj) - window):
        training_data.append((traj[i:i + window], traj[i + 1:i + window + 1]))


def train(model, ddt):
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    model.train()
    epochs = 1
    for epoch in range(epochs):
        # Running each batch separately
        for bat in range(0, len(training_data), data[0].size(dim=0) - window):
            for seq, y_train in training_data[bat:bat + data[0].size(dim=0) - window]:
                optimizer.zero_grad()
                #model.hidden_1 = (torch.zeros(1,1,model.hidden_size_1), torch.zeros(1,1,model.hidden_size_1))
                y_pred = model(seq)
                loss = loss_fn(y_pred, y_train)
                loss.backward()  # expect: raises frees
                optimizer.step()
        print(f'Epoch: {epoch+1:2} Loss: {loss.item():10.8f}')
    return model


model = train(LSTMmodel(2, 8, 8, 2), ddt=0.05)
