"""A mean-teacher trainer "fixed" with retain_graph=True; its consistency backward then fails.

Rebuilt from the structure of forum reports of semi-supervised mean-teacher training: the
student scores labeled and noisy unlabeled images in one batched forward pass, the supervised
loss goes back and the optimizer steps, the EMA teacher is moved towards the new student, and
only then is the consistency loss against the teacher's predictions given its own backward.
That second backward first raised "backward through the graph a second time" (both losses
share the student's one forward); the user added retain_graph=True to the first backward, and
now the consistency backward needs the student's weights as the forward saved them, which
`opt.step()` has changed in place: "modified by an inplace operation". The fix is the original
cause's: add the two losses, call backward once, step once, then update the teacher; drop
retain_graph.
"""

# expect-cause: inplace-after-retain
# expect-fix: once
# expect-not-fix: retain_graph=True
import copy

import torch
from torch import nn

torch.manual_seed(0)


def update_teacher(teacher, student, decay=0.99):
    with torch.no_grad():
        for t, s in zip(teacher.parameters(), student.parameters(), strict=True):
            t.mul_(decay).add_(s, alpha=1 - decay)


student = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
teacher = copy.deepcopy(student).requires_grad_(False)
opt = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
cons_weight = 2.0
for step in range(4):
    x_lab, y_lab = torch.randn(8, 20), torch.randint(0, 5, (8,))
    x_unl = torch.randn(24, 20)
    logits = student(torch.cat([x_lab, x_unl + 0.1 * torch.randn_like(x_unl)]))  # expect: forward
    sup_loss = nn.functional.cross_entropy(logits[:8], y_lab)
    opt.zero_grad()
    sup_loss.backward(retain_graph=True)  # expect: kept
    opt.step()  # expect: changed
    update_teacher(teacher, student)
    with torch.no_grad():
        target = torch.softmax(teacher(x_unl), dim=1)
    cons_loss = nn.functional.mse_loss(torch.softmax(logits[8:], dim=1), target)
    opt.zero_grad()
    (cons_weight * cons_loss).backward()  # expect: raises
    opt.step()
    print(f"step {step}: sup {sup_loss.item():.4f} cons {cons_loss.item():.4f}")
