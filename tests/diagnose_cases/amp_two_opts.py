"""Mixed precision with one GradScaler and two optimizers, each getting its own scaler.scale(loss).backward()."""

# expect-cause: same-loss-twice
# expect-fix: once
# expect-not-fix: retain_graph
# expect-not-fix: before the loop
import torch
from torch import nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
log_temperature = nn.Parameter(torch.zeros(()))
opt_model = torch.optim.SGD(backbone.parameters(), lr=0.05)
opt_temp = torch.optim.Adam([log_temperature], lr=1e-2)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
for step in range(3):
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = backbone(x) / log_temperature.exp()
        loss = nn.functional.cross_entropy(logits.float(), y)  # expect: forward
    for opt in (opt_model, opt_temp):
        opt.zero_grad()
        scaler.scale(loss).backward()  # expect: raises frees
        scaler.step(opt)
    scaler.update()
    print(f"step {step}: {loss.item():.5f}")
