# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
params = {"alpha": 0.9, "temperature": 4.0, "num_epochs": 2, "batch_size": 32}


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc1 = nn.Linear(64, width)
        self.fc2 = nn.Linear(width, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))  # expect: forward


def make_dataloader(n_batches=5):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(params["batch_size"], 64, generator=g),
             torch.randint(0, 10, (params["batch_size"],), generator=g)) for _ in range(n_batches)]


def loss_fn_kd(outputs, labels, teacher_outputs, params):
    alpha, T = params["alpha"], params["temperature"]
    kd = nn.KLDivLoss(reduction="batchmean")(F.log_softmax(outputs / T, dim=1),
                                             F.softmax(teacher_outputs / T, dim=1))
    return kd * (alpha * T * T) + F.cross_entropy(outputs, labels) * (1.0 - alpha)


def train_teacher(teacher_model, dataloader, epochs=3):
    teacher_model.train()
    opt = torch.optim.SGD(teacher_model.parameters(), lr=0.05)
    for _ in range(epochs):
        for data_batch, labels_batch in dataloader:
            opt.zero_grad()
            F.cross_entropy(teacher_model(data_batch), labels_batch).backward()
            opt.step()


def fetch_teacher_outputs(teacher_model, dataloader):
    teacher_model.eval()
    teacher_outputs = []
    for data_batch, labels_batch in dataloader:
        output_teacher_batch = teacher_model(data_batch)
        teacher_outputs.append(output_teacher_batch)
    return teacher_outputs


def train_kd(model, teacher_outputs, optimizer, loss_fn_kd, dataloader, params):
    model.train()
    for i, (train_batch, labels_batch) in enumerate(dataloader):
        output_batch = model(train_batch)
        output_teacher_batch = teacher_outputs[i]
        loss = loss_fn_kd(output_batch, labels_batch, output_teacher_batch, params)
        optimizer.zero_grad()
        loss.backward()  # expect: raises frees
        optimizer.step()
    return loss.item()


def train_and_evaluate_kd(model, teacher_model, train_dataloader, optimizer, loss_fn_kd, params):
    teacher_outputs = fetch_teacher_outputs(teacher_model, train_dataloader)
    for epoch in range(params["num_epochs"]):
        loss = train_kd(model, teacher_outputs, optimizer, loss_fn_kd, train_dataloader, params)
        print(f"epoch {epoch + 1}/{params['num_epochs']} loss {loss:.4f}")


train_dataloader = make_dataloader()
teacher_model = Net(width=256)
train_teacher(teacher_model, train_dataloader)
model = Net(width=16)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_and_evaluate_kd(model, teacher_model, train_dataloader, optimizer, loss_fn_kd, params)
