# Source: https://fangdahan.medium.com/pytorch-style-transfer-tutorial-91e58d6b1055
# Shape: neural style transfer, L-BFGS closure over the input image; loss modules keep their targets undetached.
import torch
import torch.nn as nn
import torch.nn.functional as F


def gram_matrix(feat):
    b, c, h, w = feat.size()
    f = feat.view(b * c, h * w)
    return f @ f.t() / (b * c * h * w)


class ContentLoss(nn.Module):
    def __init__(self, target):
        super().__init__()
        self.target = target

    def forward(self, x):
        self.loss = F.mse_loss(x, self.target)
        return x


class StyleLoss(nn.Module):
    def __init__(self, target_feature):
        super().__init__()
        self.target = gram_matrix(target_feature)

    def forward(self, x):
        self.loss = F.mse_loss(gram_matrix(x), self.target)
        return x


torch.manual_seed(0)
cnn = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU()
)
content_img = torch.rand(1, 3, 16, 16)
style_img = torch.rand(1, 3, 16, 16)

model = nn.Sequential()
content_losses, style_losses = [], []
for i, layer in enumerate(cnn):
    model.add_module(f"layer_{i}", layer)
    if isinstance(layer, nn.Conv2d):
        sl = StyleLoss(model(style_img))
        model.add_module(f"style_loss_{i}", sl)
        style_losses.append(sl)
    if i == 2:
        cl = ContentLoss(model(content_img))
        model.add_module(f"content_loss_{i}", cl)
        content_losses.append(cl)

input_img = content_img.clone().requires_grad_(True)
optimizer = torch.optim.LBFGS([input_img], max_iter=4)

for run in range(2):

    def closure():
        with torch.no_grad():
            input_img.clamp_(0, 1)
        optimizer.zero_grad()
        model(input_img)
        style_score = sum(sl.loss for sl in style_losses) * 1000
        content_score = sum(cl.loss for cl in content_losses)
        loss = style_score + content_score
        loss.backward()
        return loss

    loss = optimizer.step(closure)
    print(f"run {run} loss {loss.item():.5f}")
