# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ContrastiveQueueModel(nn.Module):
    def __init__(self, dim=16, K=64, T=0.07):
        super().__init__()
        self.K, self.T = K, T
        self.encoder_q = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, dim))
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))

    def _dequeue_and_enqueue(self, keys):
        self.queue = torch.cat((keys.T, self.queue), 1)
        self.queue = self.queue[:, 0:self.K]

    def forward(self, im_q, im_k):
        q = F.normalize(self.encoder_q(im_q), dim=1)
        k = F.normalize(self.encoder_q(im_k), dim=1)  # expect: forward
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue])
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


def augment(x):
    return x + 0.1 * torch.randn_like(x)


def train(loader, model, criterion, optimizer, epoch):
    model.train()
    for i, images in enumerate(loader):
        output, target = model(im_q=augment(images), im_k=augment(images))
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()  # expect: raises frees
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")


loader = [torch.randn(16, 32) for _ in range(6)]
model = ContrastiveQueueModel()
optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, weight_decay=1e-4)
criterion = nn.CrossEntropyLoss()
for epoch in range(2):
    train(loader, model, criterion, optimizer, epoch)
