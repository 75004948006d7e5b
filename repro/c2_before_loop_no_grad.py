import torch
from torch import nn

torch.manual_seed(0)
encoder, head = nn.Linear(8, 4), nn.Linear(4, 1)  # encoder: pretrained, not trained here
opt = torch.optim.SGD(head.parameters(), lr=0.05)
x, y = torch.randn(16, 8), torch.randn(16, 1)
with torch.no_grad():
    feats = encoder(x).relu()
for step in range(1, 5):
    opt.zero_grad()
    loss = nn.functional.mse_loss(head(feats), y)
    loss.backward()
    opt.step()
    print("step", step, "loss", round(loss.item(), 4))
