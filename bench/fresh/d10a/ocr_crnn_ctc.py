# expect-cause: same-loss-twice
import torch
import torch.nn as nn

torch.manual_seed(0)
alphabet = "0123456789"
batch_size, imgH, imgW = 8, 16, 48


class CRNN(nn.Module):
    def __init__(self, nclass, nh=32):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(1, 16, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(16, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(True), nn.MaxPool2d((2, 1), (2, 1)),
            nn.Conv2d(32, 32, (4, 1)), nn.ReLU(True))
        self.rnn = nn.LSTM(32, nh, bidirectional=True)
        self.embedding = nn.Linear(nh * 2, nclass)

    def forward(self, input):
        conv = self.cnn(input).squeeze(2).permute(2, 0, 1)
        recurrent, _ = self.rnn(conv)
        T, b, h = recurrent.size()
        return self.embedding(recurrent.view(T * b, h)).view(T, b, -1).log_softmax(2)


class strLabelConverter:
    def __init__(self, alphabet):
        self.dict = {char: i + 1 for i, char in enumerate(alphabet)}

    def encode(self, texts):
        length = torch.IntTensor([len(t) for t in texts])
        return torch.IntTensor([self.dict[c] for t in texts for c in t]), length


def train_loader(n=4):
    for _ in range(n):
        texts = ["".join(alphabet[j] for j in torch.randint(0, 10, (4,)).tolist()) for _ in range(batch_size)]
        yield torch.randn(batch_size, 1, imgH, imgW), texts


crnn = CRNN(len(alphabet) + 1)
converter = strLabelConverter(alphabet)
criterion = nn.CTCLoss(zero_infinity=True)
optimizer = torch.optim.Adam(crnn.parameters(), lr=1e-3, betas=(0.5, 0.999))


def trainBatch(net, criterion, optimizer, data):
    cpu_images, cpu_texts = data
    text, length = converter.encode(cpu_texts)
    preds = net(cpu_images)
    preds_size = torch.IntTensor([preds.size(0)] * batch_size)
    cost = criterion(preds, text, preds_size, length) / batch_size  # expect: forward
    net.zero_grad()
    cost.backward()  # expect: frees
    optimizer.step()
    return cost


for epoch in range(2):
    for i, data in enumerate(train_loader()):
        crnn.train()
        cost = trainBatch(crnn, criterion, optimizer, data)
        cost.backward()  # expect: raises
        torch.nn.utils.clip_grad_norm_(crnn.parameters(), 5.0)
        optimizer.step()
    print(f"[{epoch}] Loss: {cost.item():.4f}")
