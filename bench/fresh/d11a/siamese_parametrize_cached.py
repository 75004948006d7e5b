# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.parametrize as parametrize
from torch.nn.utils.parametrizations import orthogonal

torch.manual_seed(0)


class SiameseNet(nn.Module):
    def __init__(self, in_dim=32, emb_dim=16):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU())
        self.proj = orthogonal(nn.Linear(32, emb_dim, bias=False))

    def embed(self, x):
        return F.normalize(self.proj(self.backbone(x)), dim=1)  # expect: forward

    def forward(self, img0, img1):
        return self.embed(img0), self.embed(img1)


def contrastive_loss(e0, e1, same, margin=0.5):
    d = (e0 - e1).pow(2).sum(1).sqrt()
    return (same * d.pow(2) + (1 - same) * F.relu(margin - d).pow(2)).mean()


class SiameseModule:
    def __init__(self, model):
        self.model = model

    def training_step(self, batch):
        img0, img1, same = batch
        e0, e1 = self.model(img0, img1)
        return contrastive_loss(e0, e1, same)

    def configure_optimizers(self):
        return torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, batches):
        opt = module.configure_optimizers()
        with parametrize.cached():
            for epoch in range(self.max_epochs):
                for batch in batches:
                    def closure():
                        opt.zero_grad()
                        loss = module.training_step(batch)
                        loss.backward()  # expect: raises frees
                        return loss
                    loss = opt.step(closure)
                print(f"epoch {epoch} loss {loss.item():.4f}")


def make_batch(n=16, dim=32):
    img0, same = torch.randn(n, dim), torch.randint(0, 2, (n,)).float()
    img1 = torch.where(same[:, None] > 0, img0 + 0.1 * torch.randn(n, dim), torch.randn(n, dim))
    return img0, img1, same


Trainer(max_epochs=2).fit(SiameseModule(SiameseNet()), [make_batch() for _ in range(3)])
