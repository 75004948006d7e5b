# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Encoder_M(nn.Module):
    def __init__(self, keydim=8, valdim=16):
        super().__init__()
        self.conv = nn.Conv2d(4, 16, 3, stride=2, padding=1)
        self.key, self.value = nn.Conv2d(16, keydim, 1), nn.Conv2d(16, valdim, 1)

    def forward(self, frame, mask):
        r = F.relu(self.conv(torch.cat([frame, mask], dim=1)))
        return self.key(r), self.value(r)


class Encoder_Q(nn.Module):
    def __init__(self, keydim=8, valdim=16):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.key, self.value = nn.Conv2d(16, keydim, 1), nn.Conv2d(16, valdim, 1)

    def forward(self, frame):
        r = F.relu(self.conv(frame))
        return self.key(r), self.value(r)


class STM(nn.Module):
    def __init__(self):
        super().__init__()
        self.Encoder_M, self.Encoder_Q = Encoder_M(), Encoder_Q()
        self.Decoder = nn.Sequential(nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))

    def memorize(self, frame, mask):
        k, v = self.Encoder_M(frame, mask)
        return k.unsqueeze(2), v.unsqueeze(2)

    def segment(self, frame, keys, values):
        k_q, v_q = self.Encoder_Q(frame)
        B, C, T, H, W = keys.shape
        mk = keys.flatten(2).transpose(1, 2)
        p = torch.softmax(torch.bmm(mk, k_q.flatten(2)) / C ** 0.5, dim=1)
        mem = torch.bmm(values.flatten(2), p).view(B, -1, H, W)
        logit = self.Decoder(torch.cat([mem, v_q], dim=1))  # expect: forward
        return F.interpolate(logit, scale_factor=2, mode="bilinear", align_corners=False)


model = STM()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
for it in range(3):
    Fs, Ms = torch.rand(2, 3, 3, 16, 16), (torch.rand(2, 3, 1, 16, 16) > 0.5).float()
    optimizer.zero_grad()
    keys, values = model.memorize(Fs[:, 0], Ms[:, 0])
    for t in range(1, 3):
        logit = model.segment(Fs[:, t], keys, values)  # expect: forward
        loss = F.binary_cross_entropy_with_logits(logit, Ms[:, t])
        torch.autograd.backward([loss])  # expect: raises frees
        if t < 2:
            k_t, v_t = model.memorize(Fs[:, t], torch.sigmoid(logit))
            keys, values = torch.cat([keys, k_t], dim=2), torch.cat([values, v_t], dim=2)
    optimizer.step()
    print(f"iter {it} loss {loss.item():.4f}")
