"""One helper does zero_grad, backward and step; it is called for two losses on one forward."""

# expect-cause: shared-forward
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
decoder = nn.Linear(16, 8)
probe = nn.Linear(16, 2)
opt = torch.optim.SGD([*encoder.parameters(), *decoder.parameters(), *probe.parameters()], lr=0.1)


def update(loss):
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()


for _step in range(3):
    x, labels = torch.randn(4, 8), torch.randint(0, 2, (4,))
    code = encoder(x)  # expect: forward
    update(nn.functional.mse_loss(decoder(code), x))
    update(nn.functional.cross_entropy(probe(code), labels))
