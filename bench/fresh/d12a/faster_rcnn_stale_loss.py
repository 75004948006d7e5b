# Faster R-CNN (longcw/faster_rcnn_pytorch style) on a custom set with some object-free images (issue #90)
# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def box_iou(a, b):
    lt, rb = torch.max(a[:, None, :2], b[None, :, :2]), torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = lambda x: (x[:, 2:] - x[:, :2]).prod(-1)
    return inter / (area(a)[:, None] + area(b)[None] - inter)


class RPN(nn.Module):
    def __init__(self):
        super(RPN, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.score_conv = nn.Conv2d(16, 2, 1)

    @property
    def loss(self):
        return self.cross_entropy

    def forward(self, im_data, gt_boxes):
        features = self.features(im_data)
        rpn_cls_score = self.score_conv(features).flatten(2).squeeze(0).t()
        labels = torch.zeros(rpn_cls_score.shape[0], dtype=torch.long)
        if len(gt_boxes):
            labels[:len(gt_boxes)] = 1
        self.cross_entropy = F.cross_entropy(rpn_cls_score, labels)
        rois = torch.rand(32, 2) * 24
        rois = torch.cat([rois, rois + 6 + torch.rand(32, 2) * 8], 1)
        return features, rois


class FasterRCNN(nn.Module):
    n_classes = 4

    def __init__(self):
        super(FasterRCNN, self).__init__()
        self.rpn = RPN()
        self.fc6 = nn.Linear(16 * 3 * 3, 64)
        self.score_fc = nn.Linear(64, self.n_classes)
        self.bbox_fc = nn.Linear(64, self.n_classes * 4)

    @property
    def loss(self):
        return self.cross_entropy + self.loss_box * 10

    def roi_pool(self, features, rois):
        crops = [F.adaptive_max_pool2d(features[0, :, int(y0 // 2):int(y1 // 2) + 1, int(x0 // 2):int(x1 // 2) + 1], 3)
                 for x0, y0, x1, y1 in rois.tolist()]
        return torch.stack(crops)

    def forward(self, im_data, gt_boxes, gt_classes):
        features, rois = self.rpn(im_data, gt_boxes)
        x = F.relu(self.fc6(self.roi_pool(features, rois).flatten(1)))
        cls_score, bbox_pred = self.score_fc(x), self.bbox_fc(x)
        if self.training:
            self.build_loss(cls_score, bbox_pred, rois, gt_boxes, gt_classes)
        return cls_score, bbox_pred

    def build_loss(self, cls_score, bbox_pred, rois, gt_boxes, gt_classes):
        labels = torch.zeros(len(rois), dtype=torch.long)
        if len(gt_boxes):
            iou, assigned = box_iou(rois, gt_boxes).max(1)
            labels[iou >= 0.3] = gt_classes[assigned[iou >= 0.3]]
        self.cross_entropy = F.cross_entropy(cls_score, labels)
        fg = labels > 0
        if fg.sum() > 0:
            targets = (gt_boxes[assigned[fg]] - rois[fg]) / 8.0
            pred = bbox_pred[fg].view(-1, self.n_classes, 4)[torch.arange(int(fg.sum())), labels[fg]]
            self.loss_box = F.smooth_l1_loss(pred, targets)  # expect: forward


data = [(torch.rand(1, 3, 32, 32), torch.tensor([[4., 4., 16., 14.], [12., 10., 26., 28.]]), torch.tensor([1, 3])),
        (torch.rand(1, 3, 32, 32), torch.zeros(0, 4), torch.zeros(0, dtype=torch.long))]
net = FasterRCNN().train()
optimizer = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
for step in range(4):
    im_data, gt_boxes, gt_classes = data[step % len(data)]
    net(im_data, gt_boxes, gt_classes)
    loss = net.loss + net.rpn.loss
    optimizer.zero_grad()
    loss.backward()  # expect: raises frees
    optimizer.step()
    print('step %d, loss: %.4f' % (step, loss.item()))
