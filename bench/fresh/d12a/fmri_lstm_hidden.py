# LSTM classifying sex from fMRI ROI time series (sgadgil6/cnslab_fmri issue #4, run_training_lstm.py)
# expect-cause: carried-state
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device('cpu')
BATCH_SIZE = 16
N_ROI, N_TIME = 22, 30


class fMRI_LSTM(nn.Module):
    def __init__(self, hidden_dim, input_dim):
        super(fMRI_LSTM, self).__init__()
        self.hidden_dim = hidden_dim
        self.lstm = nn.LSTM(input_dim, hidden_dim, num_layers=1, batch_first=True)
        self.linear = nn.Linear(hidden_dim, 1)
        self.hidden = self.init_hidden()
        self.dropout = nn.Dropout(p=0.2)
        self.activate = nn.Sigmoid()

    def init_hidden(self, ):
        return (torch.randn(1, BATCH_SIZE, self.hidden_dim).to(device),
                torch.randn(1, BATCH_SIZE, self.hidden_dim).to(device))

    def forward(self, x):
        lstm_out, self.hidden = self.lstm(x, self.hidden)  # expect: forward
        lstm_out = lstm_out[:, -1, :]
        out = self.dropout(lstm_out)
        linear_output = self.linear(out)
        final = self.activate(linear_output)
        return final


def get_batches(n_subjects=48):
    data = torch.randn(n_subjects, N_TIME, N_ROI)
    labels = (data[:, :, :5].mean(dim=(1, 2)) > 0).float()
    data[labels.bool(), :, :5] += 0.3
    for i in range(0, n_subjects, BATCH_SIZE):
        yield data[i:i + BATCH_SIZE].to(device), labels[i:i + BATCH_SIZE].to(device)


model = fMRI_LSTM(hidden_dim=32, input_dim=N_ROI).to(device)
criterion = nn.BCELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.001, weight_decay=1e-4)

for epoch in range(2):
    model.train()
    running_loss = 0.0
    for batch_x, batch_y in get_batches():
        model.zero_grad()
        outputs = model(batch_x)
        loss = criterion(outputs.squeeze(), batch_y)
        loss.backward()  # expect: raises frees
        optimizer.step()
        running_loss += loss.item()
    print('epoch %d, loss %.4f' % (epoch, running_loss))
