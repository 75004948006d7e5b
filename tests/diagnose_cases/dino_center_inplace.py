"""Self-distillation (DINO-style) whose teacher-output center is an EMA updated with grad on.

It raises torch's in-place error ("modified by an inplace operation") without any
retain_graph=True call: not the diagnoser's to explain, so it must stay silent and leave the
error as torch gives it.
"""

# expect-cause: none
# expect-ended: RuntimeError
import copy

import torch
from torch import nn

torch.manual_seed(0)
student = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16))
teacher = copy.deepcopy(student)
opt = torch.optim.SGD(student.parameters(), lr=0.05)
center = torch.zeros(16)
for step in range(3):
    images = torch.randn(8, 32)
    s_out = student(images + 0.1 * torch.randn(8, 32))
    t_out = teacher(images)
    t_prob = torch.softmax((t_out - center) / 0.04, dim=1).detach()
    loss = -(t_prob * torch.log_softmax(s_out / 0.1, dim=1)).sum(1).mean()
    reg = (s_out.mean(0) - center).pow(2).sum()
    opt.zero_grad()
    (loss + 0.1 * reg).backward()
    opt.step()
    with torch.no_grad():
        for ps, pt in zip(student.parameters(), teacher.parameters(), strict=True):
            pt.mul_(0.99).add_(ps, alpha=0.01)
    center = 0.9 * center + 0.1 * t_out.mean(0)
    print(f"step {step}: {loss.item():.4f}")
