# PSENet exposure correction with a pseudo-GT from the previous iteration (VinAIResearch/PSENet-Image-Enhancement issue #1)
# expect-cause: same-loss-twice
import torch
import torch.nn as nn

torch.manual_seed(0)


class UnetTMO(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(3, ch, 3, padding=1), nn.ReLU(), nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU())
        self.gamma_head = nn.Conv2d(ch, 1, 1)

    def forward(self, im):
        gamma = torch.exp(torch.tanh(self.gamma_head(self.enc(im))))
        return im.clamp(1e-4, 1) ** gamma, gamma


class TVLoss(nn.Module):
    def forward(self, x):
        return (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., 1:] - x[..., :-1]).abs().mean()


def iqa(im):
    return -(im.mean(dim=1, keepdim=True) - 0.5).abs()


class PSENet(nn.Module):
    def __init__(self, tv_w=5.0, number_refs=2, lr=1e-3):
        super().__init__()
        self.tv_w, self.number_refs, self.lr = tv_w, number_refs, lr
        self.model = UnetTMO()
        self.mse = nn.MSELoss()
        self.tv = TVLoss()
        self.saved_input = None
        self.saved_pseudo_gt = None

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.lr, betas=[0.9, 0.99])

    def generate_pseudo_gt(self, im):
        bs, ch, h, w = im.shape
        gammas = torch.exp(torch.rand(bs, self.number_refs) * torch.linspace(-1, 1, self.number_refs))
        synthetic_references = 1 - (1 - im[:, None]) ** gammas[:, :, None, None, None]
        previous_iter_output = self.model(im)[0].clone().detach()
        references = torch.cat([im[:, None], previous_iter_output[:, None], synthetic_references], dim=1)
        nref = references.shape[1]
        scores = iqa(references.view(bs * nref, ch, h, w)).view(bs, nref, 1, h, w)
        max_idx = torch.argmax(scores, dim=1).repeat(1, ch, 1, 1)[:, None]
        return torch.gather(references, 1, max_idx).squeeze(1)

    def training_step(self, batch, batch_idx):
        nth_input = batch
        nth_pseudo_gt = self.generate_pseudo_gt(batch)
        loss = None
        if self.saved_input is not None:
            pred_im, pred_gamma = self.model(self.saved_input)
            reconstruction_loss = self.mse(pred_im, self.saved_pseudo_gt)
            loss = reconstruction_loss + self.tv(pred_gamma) * self.tv_w  # expect: forward
            loss.backward()  # expect: frees
        self.saved_input = nth_input
        self.saved_pseudo_gt = nth_pseudo_gt
        return loss


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, loader):
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            for batch_idx, batch in enumerate(loader):
                loss = module.training_step(batch, batch_idx)
                if loss is None:
                    continue
                loss.backward()  # expect: raises
                optimizer.step()
                optimizer.zero_grad()
            print('epoch', epoch, 'loss', loss.item())


loader = [torch.rand(4, 3, 24, 24) ** 2 for _ in range(4)]
Trainer(max_epochs=2).fit(PSENet(), loader)
