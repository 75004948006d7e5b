"""A retriever and a reader that share one nn.Embedding, each with its own optimizer.

Rebuilt from the structure of forum questions about jointly trained retriever/reader (and
encoder/decoder) pairs with tied token embeddings: both models register the same embedding
module, so each optimizer, built from its model's parameters, holds the embedding too. To save
a lookup the script embeds the batch once and hands the result to both models, then trains
them one after the other: the retriever's loss goes back and its optimizer steps, then the
reader's. The reader's backward reaches the shared lookup's node, which the retriever's
backward freed. Two losses on one forward pass (the lookup); the fix is to embed the batch
again for the reader instead of reusing `embedded` (or embed inside each model's own forward),
so each backward has its own graph.
retain_graph=True on the retriever's backward also runs here (the lookup saved only the token
ids, which opt_r.step() does not change); adding the losses and calling backward once would
step the embedding twice, by both optimizers, with the summed gradient.
"""

# expect-cause: shared-forward
# expect-fix: embedded
import torch
from torch import nn

torch.manual_seed(0)


class Retriever(nn.Module):
    def __init__(self, embedding, passages=6):
        super().__init__()
        self.embedding = embedding
        self.proj = nn.Linear(embedding.embedding_dim, passages)

    def forward(self, emb):
        return self.proj(emb.mean(dim=1))


class Reader(nn.Module):
    def __init__(self, embedding, hidden=24):
        super().__init__()
        self.embedding = embedding
        self.gru = nn.GRU(embedding.embedding_dim, hidden, batch_first=True)
        self.span = nn.Linear(hidden, 2)

    def forward(self, emb):
        out, _ = self.gru(emb)
        return self.span(out).unbind(dim=2)


shared = nn.Embedding(50, 16)
retriever, reader = Retriever(shared), Reader(shared)
opt_r = torch.optim.Adam(retriever.parameters(), lr=1e-3)
opt_q = torch.optim.Adam(reader.parameters(), lr=1e-3)
for step in range(3):
    tokens = torch.randint(0, 50, (8, 12))
    gold_passage = torch.randint(0, 6, (8,))
    start, end = torch.randint(0, 12, (8,)), torch.randint(0, 12, (8,))
    embedded = shared(tokens)  # expect: forward
    loss_r = nn.functional.cross_entropy(retriever(embedded), gold_passage)
    start_logits, end_logits = reader(embedded)
    loss_q = nn.functional.cross_entropy(start_logits, start)
    loss_q = loss_q + nn.functional.cross_entropy(end_logits, end)
    opt_r.zero_grad()
    loss_r.backward()  # expect: frees
    opt_r.step()
    opt_q.zero_grad()
    loss_q.backward()  # expect: raises
    opt_q.step()
    print(f"step {step}: retriever {loss_r.item():.4f} reader {loss_q.item():.4f}")
