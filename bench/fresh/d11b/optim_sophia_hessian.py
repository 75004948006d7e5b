# expect-cause: shared-forward
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import Optimizer

torch.manual_seed(0)
VOCAB, BLOCK, D_MODEL, BATCH = 64, 16, 32, 8


class SophiaG(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.965, 0.99), rho=0.04, weight_decay=1e-1):
        super().__init__(params, dict(lr=lr, betas=betas, rho=rho, weight_decay=weight_decay))

    def _init_state(self, p):
        state = self.state[p]
        if len(state) == 0:
            state["step"], state["exp_avg"], state["hessian"] = 0, torch.zeros_like(p), torch.zeros_like(p)
        return state

    @torch.no_grad()
    def update_hessian(self):
        for group in self.param_groups:
            beta2 = group["betas"][1]
            for p in group["params"]:
                if p.grad is not None:
                    self._init_state(p)["hessian"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)

    @torch.no_grad()
    def step(self, closure=None, bs=5120):
        for group in self.param_groups:
            beta1, lr = group["betas"][0], group["lr"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self._init_state(p)
                state["step"] += 1
                p.mul_(1 - lr * group["weight_decay"])
                state["exp_avg"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                ratio = (state["exp_avg"].abs() / (group["rho"] * bs * state["hessian"] + 1e-15)).clamp(None, 1)
                p.addcmul_(state["exp_avg"].sign(), ratio, value=-lr)


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(BLOCK, D_MODEL)
        self.block = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0)
        self.lm_head = nn.Linear(D_MODEL, VOCAB, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(BLOCK))

    def forward(self, idx, targets=None):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        logits = self.lm_head(self.block(x, src_mask=self.mask, is_causal=True))  # expect: forward
        loss = None if targets is None else F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        return logits, loss


data = torch.randint(0, VOCAB, (4000,))


def get_batch():
    ix = torch.randint(len(data) - BLOCK - 1, (BATCH,))
    return torch.stack([data[i:i + BLOCK] for i in ix]), torch.stack([data[i + 1:i + 1 + BLOCK] for i in ix])


model = TinyGPT()
optimizer = SophiaG(model.parameters(), lr=3e-4, rho=0.05)
hess_interval = 2
for iter_num in range(8):
    X, Y = get_batch()
    logits, loss = model(X, Y)
    loss.backward()  # expect: frees
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step(bs=BATCH * BLOCK)
    optimizer.zero_grad(set_to_none=True)

    if iter_num % hess_interval == hess_interval - 1:
        samp_dist = torch.distributions.Categorical(logits=logits)
        y_sample = samp_dist.sample()
        loss_sampled = F.cross_entropy(logits.view(-1, VOCAB), y_sample.view(-1), ignore_index=-1)
        loss_sampled.backward()  # expect: raises
        optimizer.update_hessian()
        optimizer.zero_grad(set_to_none=True)
    print(f"iter {iter_num}: loss {loss.item():.4f}")
