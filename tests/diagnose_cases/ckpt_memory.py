"""A recurrent-memory transformer block run under torch.utils.checkpoint, its memory carried undetached."""

# expect-cause: carried-state
# expect-fix: memory
# expect-fix: detach
# expect-not-fix: `h = h.detach()`
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class MemoryBlock(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.mix = nn.Sequential(nn.Linear(2 * d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x, memory):
        return self.mix(torch.cat([x, memory.expand_as(x)], dim=-1))


block = MemoryBlock()
readout = nn.Linear(16, 1)
opt = torch.optim.Adam(list(block.parameters()) + list(readout.parameters()), lr=1e-3)
memory = torch.zeros(1, 16)
for segment in range(3):
    x, y = torch.randn(6, 16), torch.randn(6, 1)
    h = checkpoint(block, x, memory, use_reentrant=False)  # expect: forward
    memory = h.mean(0, keepdim=True)
    loss = nn.functional.mse_loss(readout(h), y)
    opt.zero_grad()
    loss.backward()  # expect: raises frees
    opt.step()
    print(f"segment {segment}: {loss.item():.4f}")
