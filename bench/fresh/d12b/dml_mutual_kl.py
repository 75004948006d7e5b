# -*- coding: utf-8 -*-
# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable


class SmallNet(nn.Module):
    def __init__(self, num_classes=10):
        super(SmallNet, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(4))
        self.fc = nn.Linear(8 * 16, num_classes)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class Trainer(object):
    """Deep Mutual Learning: every model learns from the others' predictions."""
    def __init__(self, model_num=2, lr=0.1):
        self.model_num = model_num
        self.models = []
        self.optimizers = []
        self.loss_kl = nn.KLDivLoss(reduction='batchmean')
        self.loss_ce = nn.CrossEntropyLoss()
        for i in range(self.model_num):
            model = SmallNet()
            self.models.append(model)
            self.optimizers.append(optim.SGD(model.parameters(), lr=lr, momentum=0.9))

    def train_one_epoch(self, loader):
        for model in self.models:
            model.train()
        for images, labels in loader:
            images, labels = Variable(images), Variable(labels)
            outputs = []
            for model in self.models:
                outputs.append(model(images))  # expect: forward
            for i in range(self.model_num):
                ce_loss = self.loss_ce(outputs[i], labels)
                kl_loss = 0
                for j in range(self.model_num):
                    if i != j:
                        kl_loss += self.loss_kl(F.log_softmax(outputs[i], dim=1),
                                                F.softmax(outputs[j], dim=1))
                loss = ce_loss + kl_loss / (self.model_num - 1)
                self.optimizers[i].zero_grad()
                loss.backward()  # expect: raises frees
                self.optimizers[i].step()
        return loss.item()


if __name__ == '__main__':
    torch.manual_seed(0)
    loader = [(torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,))) for _ in range(4)]
    trainer = Trainer(model_num=2)
    for epoch in range(2):
        print('epoch', epoch, 'loss', trainer.train_one_epoch(loader))
