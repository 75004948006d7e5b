import torch
from torch import nn

torch.manual_seed(0)
body = torch.compile(
    nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4)), backend="aot_eager"
)
head1, head2 = nn.Linear(4, 1), nn.Linear(4, 1)
opt = torch.optim.SGD([*body.parameters(), *head1.parameters(), *head2.parameters()], lr=0.1)
x, y1, y2 = torch.randn(8, 3), torch.randn(8, 1), torch.randn(8, 1)
for step in range(1, 4):
    print("step", step)
    opt.zero_grad()
    feat = body(x)
    loss1 = nn.functional.mse_loss(head1(feat), y1)
    loss2 = nn.functional.mse_loss(head2(feat), y2)
    if step > 1:
        loss1.backward(retain_graph=True)
    loss2.backward()
    opt.step()
