"""A contrastive model's learnable temperature, turned into a logit scale once before the loop.

Rebuilt from the structure of CLIP-style training scripts reported on forums: the log
temperature is an nn.Parameter trained with the encoders, but `logit_scale = 3 * tau` is
computed once before the loop and reused every step. The second step's backward fails on the
multiplication `3 * tau`, which saved only the Python scalar 3 (its neighbour, `exp`, saved a
tensor). Detaching would stop the temperature training; the fix: compute `tau` and
`logit_scale` inside the loop.
"""

# expect-cause: carried-state
# expect-where: before the loop
# expect-fix: logit_scale
# expect-fix: inside the loop
# expect-not-fix: detach
import torch
from torch import nn

torch.manual_seed(0)
image_encoder = nn.Linear(20, 8)
text_encoder = nn.Linear(12, 8)
log_temperature = nn.Parameter(torch.zeros(()))
params = [*image_encoder.parameters(), *text_encoder.parameters(), log_temperature]
opt = torch.optim.AdamW(params, lr=1e-3)

tau = log_temperature.exp()
logit_scale = 3 * tau  # expect: forward
for _step in range(3):
    images, texts = torch.randn(6, 20), torch.randn(6, 12)
    a = nn.functional.normalize(image_encoder(images), dim=1)
    b = nn.functional.normalize(text_encoder(texts), dim=1)
    logits = logit_scale * a @ b.t()
    targets = torch.arange(6)
    loss = (
        nn.functional.cross_entropy(logits, targets)
        + nn.functional.cross_entropy(logits.t(), targets)
    ) / 2
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
