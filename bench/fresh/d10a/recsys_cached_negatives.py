# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
N_USERS, N_ITEMS, DIM = 100, 200, 16


class MatrixFactorization(nn.Module):
    def __init__(self):
        super().__init__()
        self.user_emb = nn.Embedding(N_USERS, DIM)
        self.item_emb = nn.Embedding(N_ITEMS, DIM)
        nn.init.normal_(self.user_emb.weight, std=0.1)
        nn.init.normal_(self.item_emb.weight, std=0.1)

    def forward(self, users, items):
        return self.user_emb(users), self.item_emb(items)  # expect: forward


class CachedBatchesSampler:
    def __init__(self, num_batches=3):
        self.num_batches = num_batches
        self.cache = []

    def sample(self, item_vecs):
        negatives = torch.cat(self.cache + [item_vecs], dim=0)
        self.cache = (self.cache + [item_vecs])[-self.num_batches:]
        return negatives


def sampled_softmax_loss(user_vecs, pos_vecs, neg_vecs):
    pos_logits = (user_vecs * pos_vecs).sum(-1, keepdim=True)
    neg_logits = user_vecs @ neg_vecs.T
    logits = torch.cat([pos_logits, neg_logits], dim=1)
    return F.cross_entropy(logits, torch.zeros(len(user_vecs), dtype=torch.long))


def interactions(n_batches=8, bs=32):
    for _ in range(n_batches):
        yield torch.randint(0, N_USERS, (bs,)), torch.randint(0, N_ITEMS, (bs,))


model = MatrixFactorization()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
sampler = CachedBatchesSampler()

for epoch in range(2):
    for users, items in interactions():
        user_vecs, item_vecs = model(users, items)
        neg_vecs = sampler.sample(item_vecs)

        def closure():
            optimizer.zero_grad()
            loss = sampled_softmax_loss(user_vecs, item_vecs, neg_vecs)
            loss.backward()  # expect: raises frees
            return loss

        loss = optimizer.step(closure)
    print(f"epoch {epoch} loss {loss.item():.4f}")
