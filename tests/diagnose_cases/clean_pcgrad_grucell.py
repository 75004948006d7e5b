"""Clean: PCGrad over two task losses on a GRUCell encoder, each loss's backward with retain_graph.

Rebuilt from the structure of PCGrad (gradient surgery) implementations and the forum threads
about them: the shared encoder (nn.Embedding and an nn.GRUCell unrolled over the tokens, from a
fresh zero state each batch) feeds a sentiment head and a next-token head; each task's loss goes
back with retain_graph=True so the next one can use the same graph, its gradients are copied
out, conflicting ones are projected, the sum is written to `.grad`, and the optimizer steps once.
No optimizer step between the calls and no graph kept across steps: nothing to report.
"""

# expect-clean
# expect-cause: none
import random

import torch
from torch import nn

torch.manual_seed(0)
random.seed(0)


class SharedEncoder(nn.Module):
    def __init__(self, vocab=40, size=20):
        super().__init__()
        self.embed = nn.Embedding(vocab, size)
        self.cell = nn.GRUCell(size, size)
        self.size = size

    def forward(self, tokens):
        h, states = torch.zeros(tokens.size(0), self.size), []
        for t in range(tokens.size(1)):
            h = self.cell(self.embed(tokens[:, t]), h)
            states.append(h)
        return torch.stack(states, dim=1)


encoder = SharedEncoder()
sentiment, next_token = nn.Linear(20, 2), nn.Linear(20, 40)
params = [*encoder.parameters(), *sentiment.parameters(), *next_token.parameters()]
opt = torch.optim.Adam(params, lr=1e-3)


def flat_grad():
    return torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params]
    )


for step in range(4):
    tokens, labels = torch.randint(0, 40, (6, 9)), torch.randint(0, 2, (6,))
    states = encoder(tokens)
    losses = [
        nn.functional.cross_entropy(sentiment(states[:, -1]), labels),
        nn.functional.cross_entropy(
            next_token(states[:, :-1]).reshape(-1, 40), tokens[:, 1:].reshape(-1)
        ),
    ]
    grads = []
    for loss in losses:
        opt.zero_grad()
        loss.backward(retain_graph=True)
        grads.append(flat_grad())
    projected = [g.clone() for g in grads]
    for g_i in projected:
        others = list(grads)
        random.shuffle(others)
        for g_j in others:
            dot = torch.dot(g_i, g_j)
            if dot < 0:
                g_i -= dot / g_j.norm() ** 2 * g_j
    merged, offset = torch.stack(projected).sum(dim=0), 0
    for p in params:
        p.grad = merged[offset : offset + p.numel()].view_as(p).clone()
        offset += p.numel()
    opt.step()
    print(f"step {step}: {[round(loss.item(), 6) for loss in losses]}")
