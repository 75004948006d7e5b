"""A mean teacher whose EMA update runs in grad mode, so the teacher's weights grow a graph.

Rebuilt from the structure of forum and review reports of EMA / mean-teacher code that dropped
`torch.no_grad()` (and `.data`) from the update: the teacher is a deep copy of the student with
`requires_grad_(False)`, so the reader scores the unlabeled batch with it without no_grad,
and after each step moves it toward the student with `t.mul_(decay).add_(s, alpha=1 - decay)`.
In grad mode that in-place update makes each teacher weight a non-leaf with a graph back to
the student's parameters and to the previous update. From the second step on, the
consistency loss goes back through the teacher's weights into that chain (adding a silent
gradient to the student); the third step's backward walks into the first update's `mul_`
node, which the second step's backward freed, and fails there (on the 0.9 it saved as a
tensor). The fix: run the EMA update under `torch.no_grad()` (as the reference code's `.data`
did), and score the batch with the teacher under torch.no_grad() too.
"""

# expect-cause: carried-state
# expect-fix: no_grad
# expect-not-fix: retain_graph
import copy

import torch
from torch import nn

torch.manual_seed(0)
student = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4))
teacher = copy.deepcopy(student).requires_grad_(False)
opt = torch.optim.Adam(student.parameters(), lr=1e-3)
decay, cons_weight = 0.9, 1.0


def update_teacher():
    for t, s in zip(teacher.parameters(), student.parameters(), strict=True):
        t.mul_(decay).add_(s, alpha=1 - decay)  # expect: forward


for step in range(5):
    x_lab, y_lab = torch.randn(8, 12), torch.randint(0, 4, (8,))
    x_unl = torch.randn(16, 12)
    sup = nn.functional.cross_entropy(student(x_lab), y_lab)
    target = torch.softmax(teacher(x_unl + 0.05 * torch.randn_like(x_unl)), dim=1)
    cons = nn.functional.mse_loss(torch.softmax(student(x_unl), dim=1), target)
    loss = sup + cons_weight * cons
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    update_teacher()
    print(f"step {step}: sup {sup.item():.4f} cons {cons.item():.6f}")
