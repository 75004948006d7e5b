# expect-cause: carried-state
import itertools
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class LinearNorm(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear, self.bn = nn.Linear(in_features, out_features, bias=False), nn.BatchNorm1d(out_features)

    def forward(self, x):
        return self.bn(self.linear(x).flatten(0, 1)).reshape_as(self.linear(x))


class Attention(nn.Module):
    def __init__(self, dim, key_dim=8, num_heads=2, resolution=4):
        super().__init__()
        self.num_heads, self.key_dim, self.scale = num_heads, key_dim, key_dim ** -0.5
        self.qkv = LinearNorm(dim, 3 * key_dim * num_heads)
        self.proj = nn.Sequential(nn.Hardswish(), LinearNorm(key_dim * num_heads, dim))
        points = list(itertools.product(range(resolution), range(resolution)))
        attention_offsets, idxs = {}, []
        for p1 in points:
            for p2 in points:
                offset = (abs(p1[0] - p2[0]), abs(p1[1] - p2[1]))
                attention_offsets.setdefault(offset, len(attention_offsets))
                idxs.append(attention_offsets[offset])
        self.attention_biases = nn.Parameter(torch.zeros(num_heads, len(attention_offsets)))
        self.register_buffer("attention_bias_idxs", torch.LongTensor(idxs).view(len(points), len(points)), persistent=False)
        self.attention_bias_cache = {}

    @torch.no_grad()
    def train(self, mode=True):
        super().train(mode)
        if mode and self.attention_bias_cache:
            self.attention_bias_cache = {}

    def get_attention_biases(self, device):
        if self.training:
            return self.attention_biases[:, self.attention_bias_idxs]
        device_key = str(device)
        if device_key not in self.attention_bias_cache:
            self.attention_bias_cache[device_key] = self.attention_biases[:, self.attention_bias_idxs]  # expect: forward
        return self.attention_bias_cache[device_key]

    def forward(self, x):
        B, N, _ = x.shape
        q, k, v = self.qkv(x).view(B, N, self.num_heads, 3 * self.key_dim).permute(0, 2, 1, 3).chunk(3, dim=-1)
        attn = (q @ k.transpose(-2, -1)) * self.scale + self.get_attention_biases(x.device)
        x = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, N, -1)
        return self.proj(x)


class LevitTiny(nn.Module):
    def __init__(self, dim=32, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dim, 4, stride=4), nn.BatchNorm2d(dim), nn.Hardswish())
        self.blocks = nn.ModuleList([Attention(dim) for _ in range(2)])
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        for blk in self.blocks:
            x = x + blk(x)
        return self.head(x.mean(1))


def run_n_iterations(model, optimizer, inputs, targets, n=3):
    for _ in range(n):
        optimizer.zero_grad(True)
        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()  # expect: raises frees
        optimizer.step()
    return loss


model = LevitTiny()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model.eval()
example_inputs, targets = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
loss = run_n_iterations(model, optimizer, example_inputs, targets)
print(f"loss after training iterations: {loss.item():.4f}")
