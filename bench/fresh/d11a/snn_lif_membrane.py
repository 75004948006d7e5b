# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class FastSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, mem, slope=25.0):
        ctx.save_for_backward(mem)
        ctx.slope = slope
        return (mem > 0).float()

    @staticmethod
    def backward(ctx, grad_output):
        (mem,) = ctx.saved_tensors
        return grad_output / (ctx.slope * mem.abs() + 1.0) ** 2, None


class Leaky(nn.Module):
    def __init__(self, beta, threshold=1.0, init_hidden=True, output=False):
        super().__init__()
        self.beta, self.threshold, self.init_hidden, self.output = beta, threshold, init_hidden, output
        self.mem = torch.zeros(1)

    def reset_mem(self):
        self.mem = torch.zeros(1)

    def forward(self, input_):
        reset = FastSigmoid.apply(self.mem - self.threshold)
        self.mem = self.beta * self.mem + input_ - reset * self.threshold  # expect: forward
        spk = FastSigmoid.apply(self.mem - self.threshold)
        return (spk, self.mem) if self.output else spk


def reset(net):
    for m in net.modules():
        if isinstance(m, Leaky):
            m.reset_mem()


beta, num_steps = 0.5, 5
net = nn.Sequential(nn.Conv2d(1, 8, 5), nn.MaxPool2d(2), Leaky(beta),
                    nn.Conv2d(8, 16, 5), nn.MaxPool2d(2), Leaky(beta),
                    nn.Flatten(), nn.Linear(16 * 4 * 4, 10), Leaky(beta, output=True))


def forward_pass(net, num_steps, data):
    mem_rec, spk_rec = [], []
    for step in range(num_steps):
        spk_out, mem_out = net(data)
        spk_rec.append(spk_out)
        mem_rec.append(mem_out)
    return torch.stack(spk_rec), torch.stack(mem_rec)


def ce_rate_loss(spk_rec, targets):
    return sum(F.cross_entropy(spk_rec[t], targets) for t in range(spk_rec.shape[0]))


optimizer = torch.optim.Adam(net.parameters(), lr=2e-3, betas=(0.9, 0.999))
train_loader = [(torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))) for _ in range(3)]
for epoch in range(2):
    for data, targets in train_loader:
        net.train()
        spk_rec, mem_rec = forward_pass(net, num_steps, data)
        loss_val = ce_rate_loss(mem_rec, targets)
        optimizer.zero_grad()
        loss_val.backward()  # expect: raises frees
        optimizer.step()
    print(f"epoch {epoch} loss {loss_val.item():.3f}")
