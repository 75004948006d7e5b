"""A graph dump (torchviz-style, with saved tensors) taken after the first step's backward.

Rebuilt from the structure of issue-tracker reports against training scripts that draw the
autograd graph of their loss with a torchviz-style `make_dot(loss, show_saved=True)` once, to
check the model: the helper walks `grad_fn.next_functions` and reads every `_saved_*`
attribute of each node to show the tensors it holds. The reader put the call after the first
step's `loss.backward()`, which had already freed those tensors, so the very first read
raises "...or directly access saved tensors after they have already been freed". The fix:
dump the graph before calling backward on that step. retain_graph=True on that backward alone
is not enough here: the dump runs after opt.step(), and reading the saved weight the step
changed in place raises torch's in-place error (checked by running it); with it, the dump must
also move before the step. Detaching anything would only hide the graph the dump is to show.
"""

# expect-cause: saved-read
# expect-fix: before
# expect-not-fix: detach
import torch
from torch import nn

torch.manual_seed(0)


def dump_graph(tensor, show_saved=True):
    seen, lines, stack = set(), [], [(tensor.grad_fn, 0)]
    while stack:
        fn, depth = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        saved = []
        if show_saved:
            for attr in dir(fn):
                if attr.startswith("_saved_"):
                    value = getattr(fn, attr)  # expect: raises
                    if isinstance(value, torch.Tensor):
                        saved.append(f"{attr[7:]}{tuple(value.shape)}")
        lines.append("  " * depth + type(fn).__name__ + (f" [{', '.join(saved)}]" if saved else ""))
        stack.extend((nxt, depth + 1) for nxt, _ in fn.next_functions)
    return "\n".join(lines)


model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    x, y = torch.randn(10, 8), torch.randn(10, 1)
    loss = nn.functional.smooth_l1_loss(model(x), y)  # expect: forward
    opt.zero_grad()
    loss.backward()  # expect: frees
    opt.step()
    if step == 0:
        print(dump_graph(loss))  # expect: caller-raises
    print(f"step {step}: {loss.item():.5f}")
