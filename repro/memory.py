import weakref

import torch

device = "cuda" if torch.cuda.is_available() else "cpu"


def measure(retain):
    saved = []

    def pack(tensor):
        saved.append((weakref.ref(tensor), tensor.element_size() * tensor.nelement()))
        return tensor

    x = torch.randn(2048, 2048, device=device, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = x.exp().exp().sum()
    print("retain_graph", retain, "saved tensors", len(saved), "bytes", sum(b for _, b in saved))
    loss.backward(retain_graph=retain)
    alive = [b for ref, b in saved if ref() is not None]
    print("retain_graph", retain, "alive after backward", len(alive), "bytes", sum(alive))
    if device == "cuda":
        print("retain_graph", retain, "cuda allocated", torch.cuda.memory_allocated())


torch.manual_seed(0)
measure(retain=False)
measure(retain=True)
print("measured on", device)
