# expect-cause: same-loss-twice
import torch
import torch.nn as nn
import torch.nn.functional as F

OPS = {
    "conv_3x3": lambda C: nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, 3, padding=1, bias=False), nn.BatchNorm2d(C, affine=False)),
    "conv_1x1": lambda C: nn.Sequential(nn.ReLU(), nn.Conv2d(C, C, 1, bias=False), nn.BatchNorm2d(C, affine=False)),
    "avg_pool_3x3": lambda C: nn.AvgPool2d(3, stride=1, padding=1),
    "skip_connect": lambda C: nn.Identity(),
}


class MixedOp(nn.Module):
    def __init__(self, C):
        super().__init__()
        self._ops = nn.ModuleList([op(C) for op in OPS.values()])

    def forward(self, x, weights):
        return sum(w * op(x) for w, op in zip(weights, self._ops))


class Network(nn.Module):
    def __init__(self, C=8, num_classes=10, steps=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, C, 3, padding=1, bias=False), nn.BatchNorm2d(C))
        self.edges = nn.ModuleList([MixedOp(C) for _ in range(steps)])
        self.classifier = nn.Linear(C, num_classes)
        self.alphas_normal = nn.Parameter(1e-3 * torch.randn(steps, len(OPS)))

    def weights(self):
        return [p for n, p in self.named_parameters() if "alphas" not in n]

    def arch_parameters(self):
        return [self.alphas_normal]

    def forward(self, x):
        s = self.stem(x)
        weights = F.softmax(self.alphas_normal, dim=-1)
        for i, edge in enumerate(self.edges):
            s = edge(s, weights[i])
        return self.classifier(F.adaptive_avg_pool2d(s, 1).flatten(1))


def train(train_queue, valid_queue, model, criterion, optimizer, arch_optimizer):
    model.train()
    for step, ((x, y), (x_search, y_search)) in enumerate(zip(train_queue, valid_queue)):
        logits = model(x)
        loss = criterion(logits, y)  # expect: forward

        arch_optimizer.zero_grad()
        loss.backward()  # expect: frees
        arch_optimizer.step()

        optimizer.zero_grad()
        loss.backward()  # expect: raises
        nn.utils.clip_grad_norm_(model.weights(), 5.0)
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


torch.manual_seed(0)
model = Network()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.weights(), lr=0.025, momentum=0.9, weight_decay=3e-4)
arch_optimizer = torch.optim.Adam(model.arch_parameters(), lr=3e-4, betas=(0.5, 0.999), weight_decay=1e-3)
train_queue = [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))) for _ in range(3)]
valid_queue = [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))) for _ in range(3)]
for epoch in range(2):
    train(train_queue, valid_queue, model, criterion, optimizer, arch_optimizer)
