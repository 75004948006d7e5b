import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
if hasattr(torch.amp, "GradScaler"):
    scaler = torch.amp.GradScaler("cpu")
else:  # no GradScaler for the CPU before torch 2.3: one that scales nothing
    scaler = torch.cuda.amp.GradScaler(enabled=False)
x, y = torch.randn(8, 3), torch.randn(8, 1)
for step in range(1, 4):
    print("step", step)
    opt.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
