"""A multi-task loop where the depth loss is reused from the previous batch when a batch has no depth labels."""

# expect-cause: carried-state
# expect-fix: loss_depth
# expect-not-fix: before the loop
# expect-not-fix: retain_graph
import torch
from torch import nn

torch.manual_seed(0)
trunk = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
seg_head, depth_head = nn.Linear(32, 4), nn.Linear(32, 1)
params = [*trunk.parameters(), *seg_head.parameters(), *depth_head.parameters()]
opt = torch.optim.Adam(params, lr=1e-3)
loss_depth = torch.tensor(0.0)
for step in range(4):
    x, seg = torch.randn(6, 8), torch.randint(0, 4, (6,))
    depth = torch.rand(6, 1) if step % 2 == 0 else None  # every other batch lacks depth labels
    feats = trunk(x)
    loss_seg = nn.functional.cross_entropy(seg_head(feats), seg)
    if depth is not None:
        loss_depth = nn.functional.l1_loss(depth_head(feats), depth)  # expect: forward
    loss = loss_seg + 0.5 * loss_depth
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"step {step}: seg {loss_seg.item():.5f} depth {loss_depth.item():.5f}")
