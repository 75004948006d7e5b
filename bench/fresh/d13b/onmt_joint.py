# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
V, D, n_classes, shard_size = 40, 32, 3, 4


class NMTModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb, self.tgt_emb = nn.Embedding(V, D), nn.Embedding(V, D)
        self.encoder = nn.GRU(D, D, batch_first=True)
        self.decoder = nn.GRU(D, D, batch_first=True)
        self.class_head = nn.Linear(D, n_classes)
        self.generator = nn.Linear(D, V)

    def forward(self, src, tgt):
        memory, enc_state = self.encoder(self.src_emb(src))  # expect: forward
        dec_out, _ = self.decoder(self.tgt_emb(tgt), enc_state)
        return dec_out, self.class_head(memory.mean(1))


class LossCompute:
    def __init__(self, generator):
        self.generator = generator

    def _compute_loss(self, output, target):
        return F.cross_entropy(self.generator(output).flatten(0, 1), target.flatten(), reduction="sum")

    def _compute_class_loss(self, logits, refs):
        return F.cross_entropy(logits, refs)

    def __call__(self, output, target, stargets_logits, stargets_refs, normalization):
        class_loss = self._compute_class_loss(stargets_logits, stargets_refs)
        class_loss.backward()  # expect: frees
        total = class_loss.item()
        for state in shards({"output": output, "target": target}, shard_size):
            loss = self._compute_loss(**state)
            loss.div(normalization).backward()
            total += loss.item()
        return total


def shards(state, shard_size):
    non_none = {k: (v, v.detach().requires_grad_(v.requires_grad) if v.requires_grad else v) for k, v in state.items()}
    keys = list(non_none)
    split = [torch.split(non_none[k][1], shard_size, dim=1) for k in keys]
    for shard_tensors in zip(*split):
        yield dict(zip(keys, shard_tensors))
    inputs = [non_none[k][0] for k in keys if non_none[k][0].requires_grad]
    grads = [non_none[k][1].grad for k in keys if non_none[k][0].requires_grad]
    torch.autograd.backward(inputs, grads)  # expect: raises


model = NMTModel()
optim = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = LossCompute(model.generator)
for step in range(3):
    src, tgt = torch.randint(0, V, (8, 10)), torch.randint(0, V, (8, 13))
    refs = torch.randint(0, n_classes, (8,))
    optim.zero_grad()
    dec_out, class_logits = model(src, tgt[:, :-1])
    total = loss_fn(dec_out, tgt[:, 1:], class_logits, refs, normalization=tgt.numel())
    optim.step()
    print(f"step {step} loss {total:.4f}")
