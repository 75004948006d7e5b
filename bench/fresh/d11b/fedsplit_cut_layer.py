# expect-cause: shared-forward
import torch
import torch.nn as nn

torch.manual_seed(0)
num_flat_features = 3 * 16 * 16


class ClientModel(nn.Module):
    def __init__(self):
        super(ClientModel, self).__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(num_flat_features, 128), nn.ReLU())

    def forward(self, x):
        x = self.layers(x)  # expect: forward
        return x


class ServerModel(nn.Module):
    def __init__(self):
        super(ServerModel, self).__init__()
        self.cut_layer = nn.Linear(128, 64)
        self.relu = nn.ReLU()
        self.cls_layer = nn.Linear(64, 10)

    def forward(self, x):
        return self.cls_layer(self.relu(self.cut_layer(x)))


class Client:
    def __init__(self):
        self.model = ClientModel()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.activations = None

    def forward_pass(self, images):
        self.optimizer.zero_grad()
        self.activations = self.model(images)
        self.activations.retain_grad()
        return self.activations

    def backward_pass(self, cut_grad):
        torch.autograd.backward([self.activations], grad_tensors=[cut_grad])  # expect: raises
        self.optimizer.step()


class Server:
    def __init__(self):
        self.model = ServerModel()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss()

    def train_step(self, smashed_data, labels):
        self.optimizer.zero_grad()
        outputs = self.model(smashed_data)
        loss = self.criterion(outputs, labels)
        loss.backward()  # expect: frees
        self.optimizer.step()
        return smashed_data.grad, loss.item()


def train(client, server, loader, epochs=2):
    for epoch in range(epochs):
        running = 0.0
        for images, labels in loader:
            smashed = client.forward_pass(images)
            cut_grad, loss = server.train_step(smashed, labels)
            client.backward_pass(cut_grad)
            running += loss
        print(f"epoch {epoch} loss {running / len(loader):.4f}")


loader = [(torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))) for _ in range(4)]
train(Client(), Server(), loader)
