# expect-cause: carried-state
import random
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)
WORDS = "good bad great awful fine poor excellent broken fast slow cheap pricey love hate ok".split()


class HashTextEmbedder:
    """Pre-encodes sentences into fixed vectors before training (not part of the network)."""

    def __init__(self, out_channels, num_hash_bins=64):
        self.out_channels, self.num_hash_bins = out_channels, num_hash_bins
        self.embedding = nn.Embedding(num_hash_bins, out_channels)

    def __call__(self, sentences):
        idx = torch.tensor([[sum(map(ord, w)) % self.num_hash_bins for w in s.split()] for s in sentences])
        return self.embedding(idx).mean(dim=1)  # expect: forward


class ReviewDataset:
    def __init__(self, num_rows=256):
        self.texts = [" ".join(random.choices(WORDS, k=6)) for _ in range(num_rows)]
        self.numerical = torch.randn(num_rows, 3)
        self.target = torch.tensor([float(sum(w in ("good", "great", "excellent", "love") for w in t.split()) > 1)
                                    for t in self.texts])
        self.tensor_frame = None

    def materialize(self, col_to_text_embedder):
        self.tensor_frame = {
            "numerical": self.numerical,
            "embedding": col_to_text_embedder["review"](self.texts),
        }
        return self


class TabularTextModel(nn.Module):
    def __init__(self, text_dim, channels=32):
        super().__init__()
        self.num_encoder = nn.Linear(3, channels)
        self.text_encoder = nn.Linear(text_dim, channels)
        self.backbone = nn.Sequential(nn.ReLU(), nn.Linear(2 * channels, channels), nn.ReLU())
        self.head = nn.Linear(channels, 1)

    def forward(self, tf):
        x = torch.cat([self.num_encoder(tf["numerical"]), self.text_encoder(tf["embedding"])], dim=-1)
        return self.head(self.backbone(x)).squeeze(-1)


dataset = ReviewDataset().materialize({"review": HashTextEmbedder(out_channels=16)})
model = TabularTextModel(text_dim=16)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


def train(epoch, batch_size=64):
    model.train()
    total = 0.0
    perm = torch.randperm(len(dataset.target))
    for start in range(0, len(perm), batch_size):
        idx = perm[start:start + batch_size]
        tf = {k: v[idx] for k, v in dataset.tensor_frame.items()}
        pred = model(tf)
        loss = F.binary_cross_entropy_with_logits(pred, dataset.target[idx])
        optimizer.zero_grad()
        loss.backward()  # expect: raises frees
        optimizer.step()
        total += loss.item() * len(idx)
    return total / len(perm)


for epoch in range(1, 4):
    print(f"Epoch: {epoch}, Train Loss: {train(epoch):.4f}")
