# expect-cause: same-loss-twice
import torch
import torch.nn.functional as F

torch.manual_seed(0)
words = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn", "abigail"] * 3
chars = sorted(set("".join(words)))
stoi = {s: i + 1 for i, s in enumerate(chars)}
stoi["."] = 0
itos = {i: s for s, i in stoi.items()}
V = len(stoi)

xs, ys = [], []
for w in words:
    chs = ["."] + list(w) + ["."]
    for ch1, ch2 in zip(chs, chs[1:]):
        xs.append(stoi[ch1])
        ys.append(stoi[ch2])
xs, ys = torch.tensor(xs), torch.tensor(ys)
num = xs.nelement()

g = torch.Generator().manual_seed(2147483647)
W = torch.randn((V, V), generator=g, requires_grad=True)

# forward pass
xenc = F.one_hot(xs, num_classes=V).float()
logits = xenc @ W
counts = logits.exp()
probs = counts / counts.sum(1, keepdims=True)
loss = -probs[torch.arange(num), ys].log().mean() + 0.01 * (W ** 2).mean()  # expect: forward
print(loss.item())

for k in range(20):
    # backward pass
    W.grad = None
    loss.backward()  # expect: raises frees

    # update
    W.data += -50 * W.grad
    print(k, loss.item())
