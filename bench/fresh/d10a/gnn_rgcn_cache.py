# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class RGCNRepresentation(nn.Module):
    def __init__(self, num_entities, num_relations, dim, edge_index, edge_type):
        super().__init__()
        self.base = nn.Embedding(num_entities, dim)
        self.rel_weights = nn.Parameter(torch.randn(num_relations, dim, dim) * 0.1)
        self.self_loop = nn.Linear(dim, dim, bias=False)
        self.register_buffer("edge_index", edge_index)
        self.register_buffer("edge_type", edge_type)
        self.enriched_embeddings = None

    def _propagate(self):
        x = self.base.weight
        src, dst = self.edge_index
        msg = torch.bmm(x[src].unsqueeze(1), self.rel_weights[self.edge_type]).squeeze(1)
        out = torch.zeros_like(x).index_add(0, dst, msg)
        return torch.relu(out + self.self_loop(x))  # expect: forward

    def forward(self, indices):
        if self.enriched_embeddings is None:
            self.enriched_embeddings = self._propagate()
        return self.enriched_embeddings[indices]


class DistMult(nn.Module):
    def __init__(self, entity_repr, num_relations, dim):
        super().__init__()
        self.entity_repr = entity_repr
        self.relation = nn.Embedding(num_relations, dim)

    def score_hrt(self, h, r, t):
        return (self.entity_repr(h) * self.relation(r) * self.entity_repr(t)).sum(-1)


class SLCWATrainingLoop:
    def __init__(self, model, optimizer, num_entities, num_negs_per_pos=4):
        self.model, self.optimizer = model, optimizer
        self.num_entities, self.num_negs = num_entities, num_negs_per_pos

    def basic_negative_sampler(self, batch):
        neg = batch.repeat_interleave(self.num_negs, dim=0).clone()
        neg[:, 2] = torch.randint(0, self.num_entities, (neg.shape[0],))
        return neg

    def _process_batch(self, batch):
        neg = self.basic_negative_sampler(batch)
        pos_scores = self.model.score_hrt(batch[:, 0], batch[:, 1], batch[:, 2])
        neg_scores = self.model.score_hrt(neg[:, 0], neg[:, 1], neg[:, 2])
        return F.softplus(-pos_scores).mean() + F.softplus(neg_scores).mean()

    def train(self, triples, num_epochs=2, batch_size=32):
        for epoch in range(num_epochs):
            perm = torch.randperm(triples.shape[0])
            for start in range(0, triples.shape[0], batch_size):
                batch = triples[perm[start:start + batch_size]]
                self.optimizer.zero_grad()
                loss = self._process_batch(batch)
                loss.backward()  # expect: raises frees
                self.optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.4f}")


num_entities, num_relations, dim = 50, 4, 16
edge_index = torch.randint(0, num_entities, (2, 200))
edge_type = torch.randint(0, num_relations, (200,))
triples = torch.stack([edge_index[0], edge_type, edge_index[1]], dim=1)

entity_repr = RGCNRepresentation(num_entities, num_relations, dim, edge_index, edge_type)
model = DistMult(entity_repr, num_relations, dim)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
SLCWATrainingLoop(model, optimizer, num_entities).train(triples)
