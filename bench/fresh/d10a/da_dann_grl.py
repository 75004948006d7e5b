# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ReverseLayerF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


class DANNModel(nn.Module):
    def __init__(self, in_dim=40, feat_dim=32, n_classes=5):
        super().__init__()
        self.feature = nn.Sequential(nn.Linear(in_dim, 64), nn.ReLU(), nn.Linear(64, feat_dim), nn.ReLU())
        self.class_classifier = nn.Sequential(nn.Linear(feat_dim, 32), nn.ReLU(), nn.Linear(32, n_classes))
        self.domain_classifier = nn.Sequential(nn.Linear(feat_dim, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, input_data, alpha):
        feature = self.feature(input_data)  # expect: forward
        class_output = self.class_classifier(feature)
        reverse_feature = ReverseLayerF.apply(feature, alpha)
        domain_output = self.domain_classifier(reverse_feature)
        return class_output, domain_output


def source_batches(n=6, bs=32):
    for _ in range(n):
        yield torch.randn(bs, 40), torch.randint(0, 5, (bs,))


def target_batches(n=6, bs=32):
    for _ in range(n):
        yield torch.randn(bs, 40) + 0.5


my_net = DANNModel()
optimizer_main = torch.optim.Adam(list(my_net.feature.parameters()) + list(my_net.class_classifier.parameters()), lr=1e-3)
optimizer_domain = torch.optim.Adam(my_net.domain_classifier.parameters(), lr=1e-3)

for epoch in range(2):
    for i, ((s_img, s_label), t_img) in enumerate(zip(source_batches(), target_batches())):
        alpha = 0.1 * (i + 1)
        my_net.zero_grad()
        class_output, s_domain_output = my_net(s_img, alpha)
        _, t_domain_output = my_net(t_img, alpha)
        err_s_label = F.cross_entropy(class_output, s_label)
        torch.autograd.backward([err_s_label])  # expect: frees

        err_s_domain = F.cross_entropy(s_domain_output, torch.zeros(32, dtype=torch.long))
        err_t_domain = F.cross_entropy(t_domain_output, torch.ones(32, dtype=torch.long))
        err_domain = err_s_domain + err_t_domain
        err_domain.backward()  # expect: raises
        optimizer_main.step()
        optimizer_domain.step()
    print(f"epoch {epoch} label {err_s_label.item():.3f} domain {err_domain.item():.3f}")
