# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F


class DSUNet(nn.Module):
    def __init__(self, in_ch=3, n_classes=4, base=8):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(in_ch, base, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(base, base * 2, 3, padding=1), nn.ReLU())
        self.dec1 = nn.Sequential(nn.Conv2d(base * 2 + base, base, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(base, n_classes, 1)
        self.aux_head2 = nn.Conv2d(base * 2, n_classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))  # expect: forward
        up = F.interpolate(e2, scale_factor=2, mode="bilinear", align_corners=False)
        d1 = self.dec1(torch.cat([up, e1], dim=1))
        out = self.head(d1)
        aux = F.interpolate(self.aux_head2(e2), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return [out, aux]


def dice_loss(logits, target, eps=1e-6):
    probs = logits.softmax(1)
    onehot = F.one_hot(target, probs.shape[1]).permute(0, 3, 1, 2).float()
    inter = (probs * onehot).sum((2, 3))
    union = probs.sum((2, 3)) + onehot.sum((2, 3))
    return 1 - ((2 * inter + eps) / (union + eps)).mean()


def train():
    torch.manual_seed(0)
    model = DSUNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    ds_weights = [1.0, 0.4]
    for epoch in range(2):
        for it in range(3):
            images = torch.randn(2, 3, 32, 32)
            masks = torch.randint(0, 4, (2, 32, 32))
            optimizer.zero_grad()
            outputs = model(images)
            total = 0.0
            for w, out in zip(ds_weights, outputs):
                loss = w * (F.cross_entropy(out, masks) + dice_loss(out, masks))
                loss.backward()  # expect: raises frees
                total += loss.item()
            optimizer.step()
        print(f"epoch {epoch} loss {total:.4f}")


if __name__ == "__main__":
    train()
