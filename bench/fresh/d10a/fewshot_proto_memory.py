# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
N_WAY, K_SHOT, N_QUERY, DIM = 5, 3, 4, 16


class ProtoNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, DIM))
        self.prototype_s = torch.zeros(N_WAY, DIM)
        self.momentum = 0.9

    def update_prototypes(self, emb_s):
        self.prototype_s = self.momentum * self.prototype_s + (1 - self.momentum) * emb_s.mean(1)  # expect: forward

    def forward(self, support, query):
        emb_s = self.encoder(support.view(-1, 32)).view(N_WAY, K_SHOT, DIM)
        emb_q = self.encoder(query.view(-1, 32)).view(N_WAY, N_QUERY, DIM)
        episode_protos = emb_s.mean(1)
        logits = -torch.cdist(emb_q.reshape(-1, DIM), episode_protos) ** 2
        labels = torch.arange(N_WAY).repeat_interleave(N_QUERY)
        loss_ce = F.cross_entropy(logits, labels)
        self.update_prototypes(emb_s)
        loss_pro = F.cosine_similarity(self.prototype_s, emb_q.mean(1)).mean()
        return loss_ce - 0.1 * loss_pro


def sample_episode():
    centers = torch.randn(N_WAY, 1, 32)
    return centers + 0.3 * torch.randn(N_WAY, K_SHOT, 32), centers + 0.3 * torch.randn(N_WAY, N_QUERY, 32)


model = ProtoNet()
lr = 0.05
for episode in range(10):
    support, query = sample_episode()
    loss = model(support, query)
    grads = torch.autograd.grad(loss, list(model.parameters()))  # expect: raises frees
    with torch.no_grad():
        for p, g in zip(model.parameters(), grads):
            p -= lr * g
    if episode % 5 == 0:
        print(f"episode {episode} loss {loss.item():.4f}")
