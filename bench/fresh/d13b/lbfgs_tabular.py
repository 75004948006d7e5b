# expect-cause: carried-state
import torch
from torch import nn, optim

torch.manual_seed(0)

x = torch.rand(size=(100, 10))
y = x @ torch.linspace(-1, 1, 10).unsqueeze(1) + 0.1 * torch.rand(size=(100, 1))


class LinearRegression(nn.Module):
    def __init__(self, p):
        super(LinearRegression, self).__init__()
        self.p = p
        self.lin = nn.Linear(p, 1)

    def forward(self, x):
        output = self.lin(x)  # expect: forward
        return output


model = LinearRegression(x.size(1))
optimizer = optim.LBFGS(model.parameters())
criterion = nn.MSELoss()

for epoch in range(5):
    pred = model(x)

    def closure():
        optimizer.zero_grad()
        loss = criterion(pred, y.view(pred.shape))
        loss.backward()  # expect: raises frees
        return loss

    loss = optimizer.step(closure)
    print(f"epoch {epoch} mse {loss.item():.5f}")
