"""Knowledge distillation from teacher logits computed once, before the epochs, with grad on.

Rebuilt from the structure of forum reports of distillation scripts that cache the teacher's
outputs to save time: the teacher (left in train mode, its parameters still requiring grad,
not in the optimizer) scores the whole small training set once before the loop, without
torch.no_grad(), and each batch slices its soft targets out of that tensor. The first batch's
backward goes through the slice into the teacher's forward and frees it; the second batch's
slice leads back into the same freed graph. The fix: compute the cached logits under
torch.no_grad() (with teacher.eval(), so dropout does not perturb the targets); detaching
them also works. retain_graph=True would run, but every batch would backprop through the
teacher's whole-dataset forward and keep it alive, for gradients nothing uses.
"""

# expect-cause: carried-state
# expect-where: before the loop
# expect-fix: no_grad
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)


class Teacher(nn.Module):
    def __init__(self, features=20, classes=6):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 64), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(64, classes)

    def forward(self, x):
        return self.head(self.body(x))  # expect: forward


teacher = Teacher()
student = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 6))
opt = torch.optim.Adam(student.parameters(), lr=1e-3)
inputs, labels = torch.randn(96, 20), torch.randint(0, 6, (96,))
temperature, alpha = 4.0, 0.7
teacher_logits = teacher(inputs)
for epoch in range(2):
    for start in range(0, 96, 32):
        x, y = inputs[start : start + 32], labels[start : start + 32]
        soft = nn.functional.softmax(teacher_logits[start : start + 32] / temperature, dim=1)
        student_logits = student(x)
        kd = nn.functional.kl_div(
            nn.functional.log_softmax(student_logits / temperature, dim=1),
            soft,
            reduction="batchmean",
        )
        ce = nn.functional.cross_entropy(student_logits, y)
        loss = alpha * temperature**2 * kd + (1 - alpha) * ce
        opt.zero_grad()
        loss.backward()  # expect: raises frees
        opt.step()
    print(f"epoch {epoch}: {loss.item():.6f}")
