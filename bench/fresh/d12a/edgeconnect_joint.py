# EdgeConnect MODEL=4: joint training of the edge generator (G1) and the inpainting generator (G2)
# (knazeri/edge-connect issue #40, src/edge_connect.py + src/models.py)
# expect-cause: shared-forward
import torch
import torch.nn as nn

torch.manual_seed(0)


def conv_net(in_ch, out_ch):
    return nn.Sequential(nn.Conv2d(in_ch, 16, 3, padding=1), nn.ReLU(True), nn.Conv2d(16, out_ch, 3, padding=1), nn.Sigmoid())


class BaseModel(nn.Module):
    def __init__(self, in_ch, out_ch, lr=1e-4):
        super().__init__()
        self.generator = conv_net(in_ch, out_ch)
        self.discriminator = nn.Sequential(nn.Conv2d(out_ch, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, 2, 1))
        self.gen_optimizer = torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(0.0, 0.9))
        self.dis_optimizer = torch.optim.Adam(self.discriminator.parameters(), lr=lr * 0.1, betas=(0.0, 0.9))
        self.adversarial_loss = nn.BCEWithLogitsLoss()
        self.l1_loss = nn.L1Loss()

    def losses(self, outputs, target):
        self.gen_optimizer.zero_grad()
        self.dis_optimizer.zero_grad()
        dis_real, dis_fake = self.discriminator(target), self.discriminator(outputs.detach())
        dis_loss = (self.adversarial_loss(dis_real, torch.ones_like(dis_real)) +
                    self.adversarial_loss(dis_fake, torch.zeros_like(dis_fake))) / 2
        gen_fake = self.discriminator(outputs)
        gen_loss = self.adversarial_loss(gen_fake, torch.ones_like(gen_fake)) + 10 * self.l1_loss(outputs, target)
        return gen_loss, dis_loss

    def backward(self, gen_loss=None, dis_loss=None):
        if gen_loss is not None:
            gen_loss.backward()  # expect: raises frees
        self.gen_optimizer.step()
        if dis_loss is not None:
            dis_loss.backward()
        self.dis_optimizer.step()


class EdgeModel(BaseModel):
    def process(self, images_gray, edges, masks):
        edges_masked = edges * (1 - masks)
        outputs = self.generator(torch.cat((images_gray * (1 - masks) + masks, edges_masked, masks), dim=1))  # expect: forward
        return (outputs,) + self.losses(outputs, edges)


class InpaintingModel(BaseModel):
    def process(self, images, edges, masks):
        images_masked = images * (1 - masks) + masks
        outputs = self.generator(torch.cat((images_masked, edges), dim=1))
        return (outputs,) + self.losses(outputs, images)


edge_model, inpaint_model = EdgeModel(3, 1), InpaintingModel(4, 3)
for epoch in range(2):
    for it in range(2):
        images = torch.rand(2, 3, 16, 16)
        images_gray = images.mean(1, keepdim=True)
        edges = (images_gray > 0.5).float()
        masks = torch.zeros(2, 1, 16, 16)
        masks[..., 4:12, 4:12] = 1
        e_outputs, e_gen_loss, e_dis_loss = edge_model.process(images_gray, edges, masks)
        e_outputs = e_outputs * masks + edges * (1 - masks)
        i_outputs, i_gen_loss, i_dis_loss = inpaint_model.process(images, e_outputs, masks)
        inpaint_model.backward(i_gen_loss, i_dis_loss)
        edge_model.backward(e_gen_loss, e_dis_loss)
    print('epoch', epoch, 'e_gen', e_gen_loss.item(), 'i_gen', i_gen_loss.item())
