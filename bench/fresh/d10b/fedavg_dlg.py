# expect-cause: carried-state
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNetTiny(nn.Module):
    def __init__(self, n_in=20, n_cls=4):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, 32), nn.Sigmoid(), nn.Linear(32, n_cls))

    def forward(self, x):
        return self.body(x)


class Client:
    def __init__(self, data, labels, lr=0.1, local_epochs=2):
        self.data, self.labels, self.lr, self.local_epochs = data, labels, lr, local_epochs
        self.model = None

    def download(self, global_model):
        self.model = copy.deepcopy(global_model)

    def local_train(self):
        opt = torch.optim.SGD(self.model.parameters(), lr=self.lr)
        for _ in range(self.local_epochs):
            opt.zero_grad()
            F.cross_entropy(self.model(self.data), self.labels).backward()
            opt.step()
        return self.model.state_dict()

    def upload_gradients(self, global_model):
        loss = F.cross_entropy(global_model(self.data[:1]), self.labels[:1])
        return [g.detach() for g in torch.autograd.grad(loss, global_model.parameters())]


class Server:
    def __init__(self, model, clients):
        self.model, self.clients = model, clients

    def fedavg_round(self):
        states = []
        for c in self.clients:
            c.download(self.model)
            states.append(c.local_train())
        avg = {k: torch.stack([s[k] for s in states]).mean(0) for k in states[0]}
        self.model.load_state_dict(avg)

    def gradient_inversion(self, received, n_iter=5, lr=0.1):
        dummy_x = torch.randn(1, 20, requires_grad=True)
        dummy_y = torch.randn(1, 4, requires_grad=True)
        attack_opt = torch.optim.Adam([dummy_x, dummy_y], lr=lr)
        dummy_pred = self.model(dummy_x)
        dummy_loss = torch.sum(-F.softmax(dummy_y, -1) * F.log_softmax(dummy_pred, -1))
        dummy_grad = torch.autograd.grad(dummy_loss, self.model.parameters(), create_graph=True)  # expect: forward
        for it in range(n_iter):
            attack_opt.zero_grad()
            distance = sum(((dg - rg) ** 2).sum() for dg, rg in zip(dummy_grad, received))
            distance.backward()  # expect: raises frees
            attack_opt.step()
            print(f"  attack iter {it} distance {distance.item():.6f}")
        return dummy_x.detach(), dummy_y.softmax(-1).detach()


torch.manual_seed(0)
clients = [Client(torch.randn(8, 20), torch.randint(0, 4, (8,))) for _ in range(3)]
server = Server(LeNetTiny(), clients)
for rnd in range(2):
    server.fedavg_round()
    print(f"round {rnd} done")
received = clients[0].upload_gradients(server.model)
x_rec, y_rec = server.gradient_inversion(received)
print("recovered label", y_rec.argmax().item(), "true", clients[0].labels[0].item())
