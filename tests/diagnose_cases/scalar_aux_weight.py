"""A weighted auxiliary loss `0.1 * recon` shared by two losses, each with its own optimizer.

Rebuilt from the structure of forum reports of semi-supervised / domain-adaptation training
with two optimizers: a reconstruction term is weighted once, added to the classifier's loss
and to the decoder's loss, and each loss gets its own backward and step. The node the second
backward finds freed is the weighting `0.1 * recon`, which saved only the Python scalar 0.1.
The fix: add the two losses and call backward once, then step both optimizers.
"""

# expect-cause: shared-forward
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(12, 24), nn.Tanh())
classifier = nn.Linear(24, 3)
decoder = nn.Linear(24, 12)
opt_cls = torch.optim.Adam([*encoder.parameters(), *classifier.parameters()], lr=1e-3)
opt_dec = torch.optim.Adam(decoder.parameters(), lr=1e-3)


def losses(x, labels):
    code = encoder(x)
    recon = nn.functional.mse_loss(decoder(code), x)
    aux = 0.1 * recon  # expect: forward
    cls_loss = nn.functional.cross_entropy(classifier(code), labels) + aux
    sparsity = decoder.weight.abs().mean() + aux
    return cls_loss, sparsity


for _step in range(3):
    x, labels = torch.randn(10, 12), torch.randint(0, 3, (10,))
    cls_loss, dec_loss = losses(x, labels)
    opt_cls.zero_grad()
    cls_loss.backward()  # expect: frees
    opt_cls.step()
    opt_dec.zero_grad()
    dec_loss.backward()  # expect: raises
    opt_dec.step()
