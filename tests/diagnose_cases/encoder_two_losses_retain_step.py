"""An autoencoder with a classifier on its code, stepping after each loss, with retain_graph=True.

Rebuilt from the structure of forum reports of semi-supervised autoencoders ("train the
reconstruction, then the classification"): one nn.Sequential encoder feeds a decoder and a
classifier, the reconstruction loss goes back with retain_graph=True (added after the first
error, see encoder_two_losses_step.py), `opt.step()` updates the encoder in place, and the
classification loss's backward needs the encoder's weights as the forward saved them: "modified
by an inplace operation". The fix is the original cause's: add the two losses, call backward
once and step once, without retain_graph.
"""

# expect-cause: inplace-after-retain
# expect-fix: once
# expect-not-fix: retain_graph=True
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(
    nn.Linear(30, 64), nn.LayerNorm(64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 8)
)
decoder = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 30))
classifier = nn.Linear(8, 4)
params = [*encoder.parameters(), *decoder.parameters(), *classifier.parameters()]
opt = torch.optim.Adam(params, lr=1e-3)
for step in range(3):
    x, y = torch.randn(16, 30), torch.randint(0, 4, (16,))
    z = encoder(x)  # expect: forward
    recon_loss = nn.functional.mse_loss(decoder(z), x)
    cls_loss = nn.functional.cross_entropy(classifier(z), y)
    opt.zero_grad()
    recon_loss.backward(retain_graph=True)  # expect: kept
    opt.step()  # expect: changed
    opt.zero_grad()
    cls_loss.backward()  # expect: raises
    opt.step()
    print(f"step {step}: recon {recon_loss.item():.4f} cls {cls_loss.item():.4f}")
