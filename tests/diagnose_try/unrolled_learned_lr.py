# Source: https://github.com/facebookresearch/higher/issues/32
# Shape: trainable step-size optimizer; the inner SGD is unrolled by hand, the meta-optimizer trains the step-size net; w carried over.
import torch
import torch.nn as nn
import torch.nn.functional as F


class StepSize(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1, 1)

    def forward(self, loss_value):
        return F.softplus(self.fc(loss_value.view(1, 1))).squeeze() * 0.1


torch.manual_seed(0)
x_tr, y_tr = torch.randn(32, 5), torch.randn(32, 1)
x_val, y_val = torch.randn(32, 5), torch.randn(32, 1)
eta = StepSize()
meta_opt = torch.optim.Adam(eta.parameters(), lr=1e-2)
w = torch.zeros(5, 1, requires_grad=True)
inner_steps = 3

for outer_i in range(3):
    for _ in range(inner_steps):
        inner_loss = F.mse_loss(x_tr @ w, y_tr)
        (g,) = torch.autograd.grad(inner_loss, w, create_graph=True)
        w = w - eta(inner_loss.detach()) * g
    meta_loss = F.mse_loss(x_val @ w, y_val)
    meta_opt.zero_grad()
    meta_loss.backward()
    meta_opt.step()
    print(f"outer {outer_i} meta_loss {meta_loss.item():.4f}")
