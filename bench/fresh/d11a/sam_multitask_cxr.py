# expect-cause: same-loss-twice
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
NUM_TASKS = 5


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        defaults = dict(rho=rho, **kwargs)
        super().__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = torch.norm(torch.stack([p.grad.norm(2) for g in self.param_groups for p in g["params"] if p.grad is not None]), 2)
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale
                p.add_(e_w)
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if "e_w" in self.state[p]:
                    p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.heads = nn.ModuleList([nn.Conv2d(32, 1, 1) for _ in range(NUM_TASKS)])

    def forward(self, x):
        feat = self.backbone(x)
        logit_maps = [head(feat) for head in self.heads]
        logits = [F.adaptive_max_pool2d(m, 1).flatten(1) for m in logit_maps]
        return logits, logit_maps


def get_loss(output, target, index, device, cfg):
    target = target[:, index].view(-1)
    loss = F.binary_cross_entropy_with_logits(output[index].view(-1), target, pos_weight=torch.tensor(cfg["pos_weight"]))  # expect: forward
    acc = ((torch.sigmoid(output[index].view(-1)) > 0.5).float() == target).float().mean()
    return loss, acc


cfg, device = {"pos_weight": 2.0}, "cpu"
model = Classifier()
optimizer = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.01, momentum=0.9)
for epoch in range(2):
    loss_sum, acc_sum = torch.zeros(NUM_TASKS), torch.zeros(NUM_TASKS)
    for step in range(3):
        image, target = torch.randn(8, 1, 32, 32), torch.randint(0, 2, (8, NUM_TASKS)).float()
        output, logit_map = model(image)
        loss = 0
        for t in range(NUM_TASKS):
            loss_t, acc_t = get_loss(output, target, t, device, cfg)
            loss += loss_t
            loss_sum[t] += loss_t.item()
            acc_sum[t] += acc_t.item()
        optimizer.zero_grad()
        loss.backward()  # expect: frees
        optimizer.first_step(zero_grad=True)
        output, logit_map = model(image)
        for t in range(NUM_TASKS):
            loss_t, acc_t = get_loss(output, target, t, device, cfg)
            loss += loss_t
            loss_sum[t] += loss_t.item()
            acc_sum[t] += acc_t.item()
        loss.backward()  # expect: raises
        optimizer.second_step(zero_grad=True)
    print(f"epoch {epoch} mean task loss {(loss_sum / 6).tolist()}")
