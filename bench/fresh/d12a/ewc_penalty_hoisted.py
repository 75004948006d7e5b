# EWC on two permuted-feature tasks, train_ewc() as posted on the ContinualAI forum ("Computing the Fisher Information Matrix in EWC")
# expect-cause: carried-state
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device('cpu')


def make_task(perm, n=256, batch_size=32):
    x = torch.randn(n, 20)
    y = (x[:, :5].sum(1) > 0).long()
    x = x[:, perm]
    return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, n, batch_size)]


def train(model, dataloader, optimizer, criterion):
    for imgs, labels in dataloader:
        optimizer.zero_grad()
        loss = criterion(model(imgs.to(device)), labels.to(device))
        loss.backward()
        optimizer.step()


def compute_fisher(model, dataloader, criterion):
    fisher_matrices = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    opt_params = {}
    for imgs, labels in dataloader:
        model.zero_grad()
        criterion(model(imgs), labels).backward()
        for name, param in model.named_parameters():
            opt_params[name] = param.data.clone().cpu()
            fisher_matrices[name] += param.grad.data.clone().pow(2).cpu() / len(dataloader)
    return fisher_matrices, opt_params


def train_ewc(model, dataloader, fisher_matrices, opt_params, ewc_weight, optimizer, criterion, device):
    """ Train one epoch of the model using Elastic Weight Consolidation strategy.
    """
    model = model.to(device)
    running_loss = 0.0
    # Regularize loss with Fisher Information Matrix
    ewc_loss = 0
    for name, param in model.named_parameters():
        fisher = fisher_matrices[name].to(device)
        opt_param = opt_params[name].to(device)
        ewc_loss += (fisher * (opt_param - param).pow(2)).sum()  # expect: forward
    for data in dataloader:
        imgs, labels = data
        optimizer.zero_grad()
        output = model(imgs.to(device))
        loss = criterion(output, labels.to(device))
        loss += ewc_weight * ewc_loss
        loss.backward()  # expect: raises frees
        optimizer.step()
        running_loss += loss.item()
    return running_loss / len(dataloader)


model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
task_a, task_b = make_task(torch.arange(20)), make_task(torch.randperm(20))
for epoch in range(3):
    train(model, task_a, optimizer, criterion)
fisher_matrices, opt_params = compute_fisher(model, task_a, criterion)
for epoch in range(3):
    print('task B epoch', epoch, train_ewc(model, task_b, fisher_matrices, opt_params, 100.0, optimizer, criterion, device))
