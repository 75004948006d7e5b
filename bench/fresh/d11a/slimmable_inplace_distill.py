# expect-cause: shared-forward
import random
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)


class SlimmableLinear(nn.Linear):
    def __init__(self, in_features, out_features, slim_in=True, slim_out=True):
        super().__init__(in_features, out_features)
        self.slim_in, self.slim_out, self.width_mult = slim_in, slim_out, 1.0

    def forward(self, x):
        out_f = int(self.out_features * self.width_mult) if self.slim_out else self.out_features
        in_f = x.shape[-1]
        return F.linear(x, self.weight[:out_f, :in_f], self.bias[:out_f])  # expect: forward


class SlimmableMLP(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.backbone = nn.Sequential(SlimmableLinear(64, 128), nn.ReLU(), SlimmableLinear(128, 128), nn.ReLU())
        self.head = SlimmableLinear(128, num_classes, slim_out=False)

    def forward(self, x):
        return self.head(self.backbone(x))


class AutoSlim:
    def __init__(self, model, width_mult_range=(0.25, 1.0), num_sample_training=4):
        self.model = model
        self.width_mult_range, self.num_sample_training = width_mult_range, num_sample_training
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def set_width(self, width_mult):
        self.model.apply(lambda m: setattr(m, "width_mult", width_mult))

    def train_step(self, input, target):
        self.optimizer.zero_grad()
        max_width = self.width_mult_range[1]
        self.set_width(max_width)
        max_output = self.model(input)  # expect: forward
        loss = F.cross_entropy(max_output, target)
        loss.backward()  # expect: frees
        width_mult_list = [self.width_mult_range[0]]
        width_mult_list += [random.uniform(*self.width_mult_range) for _ in range(self.num_sample_training - 2)]
        for width_mult in sorted(width_mult_list, reverse=True):
            self.set_width(width_mult)
            output = self.model(input)
            distill_loss = F.kl_div(F.log_softmax(output, dim=1), F.softmax(max_output, dim=1), reduction="batchmean")
            distill_loss.backward()  # expect: raises
        self.optimizer.step()
        return loss.item()


algorithm = AutoSlim(SlimmableMLP())
for epoch in range(2):
    for it in range(3):
        x, y = torch.randn(16, 64), torch.randint(0, 10, (16,))
        loss = algorithm.train_step(x, y)
    print(f"epoch {epoch} supernet loss {loss:.3f}")
