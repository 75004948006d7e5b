import torch
import torch.distributed as dist
from support import two_gloo_ranks
from torch import nn


def train(rank):  # two_gloo_ranks runs it in two processes, gloo on 127.0.0.1
    model = nn.parallel.DistributedDataParallel(nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(rank)  # each rank its own batch
    x, y1, y2 = torch.randn(8, 3), torch.randn(8, 1), torch.randn(8, 1)
    grads = []
    for step in range(1, 3):
        opt.zero_grad()
        out = model(x)
        loss1, loss2 = nn.functional.mse_loss(out, y1), nn.functional.l1_loss(out, y2)
        if step == 1:
            loss1.backward(retain_graph=True)
            loss2.backward()
        else:
            (loss1 + loss2).backward()
        both = [torch.zeros(3), torch.zeros(3)]
        dist.all_gather(both, model.module.weight.grad[0])
        grads.append([step, *both])
        opt.step()
    return grads


for step, zero, one in two_gloo_ranks(train):
    print("step", step, "rank 0:", zero, "rank 1:", one)
