# expect-cause: carried-state
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Buffer:
    def __init__(self, buffer_size, input_size, n_classes):
        self.buffer_size = buffer_size
        self.num_seen_examples = 0
        self.examples = torch.zeros(buffer_size, input_size)
        self.logits = torch.zeros(buffer_size, n_classes)

    def is_empty(self):
        return self.num_seen_examples == 0

    def add_data(self, examples, logits):
        for i in range(examples.shape[0]):
            if self.num_seen_examples < self.buffer_size:
                index = self.num_seen_examples
            else:
                index = int(torch.randint(0, self.num_seen_examples + 1, (1,)))
            self.num_seen_examples += 1
            if index < self.buffer_size:
                self.examples[index] = examples[i]
                self.logits[index] = logits[i]

    def get_data(self, size):
        n = min(self.num_seen_examples, self.buffer_size)
        choice = torch.randperm(n)[:size]
        return self.examples[choice], self.logits[choice]


class Der(nn.Module):
    def __init__(self, net, alpha=0.3, minibatch_size=16, buffer_size=100):
        super().__init__()
        self.net, self.alpha, self.minibatch_size = net, alpha, minibatch_size
        self.buffer = Buffer(buffer_size, 20, 4)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.03)

    def observe(self, inputs, labels, not_aug_inputs):
        self.opt.zero_grad()
        outputs = self.net(inputs)  # expect: forward
        loss = F.cross_entropy(outputs, labels)
        if not self.buffer.is_empty():
            buf_inputs, buf_logits = self.buffer.get_data(self.minibatch_size)
            buf_outputs = self.net(buf_inputs)
            loss = loss + self.alpha * F.mse_loss(buf_outputs, buf_logits)
        loss.backward()  # expect: raises frees
        self.opt.step()
        self.buffer.add_data(examples=not_aug_inputs, logits=outputs)
        return loss.item()


def task_stream(n_tasks=3, steps=5, bs=16):
    for t in range(n_tasks):
        for _ in range(steps):
            x = torch.randn(bs, 20) + t
            yield t, x + 0.05 * torch.randn_like(x), torch.randint(0, 4, (bs,)), x


model = Der(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4)))
for task, inputs, labels, not_aug_inputs in task_stream():
    loss = model.observe(inputs, labels, not_aug_inputs)
print("final loss", loss)
