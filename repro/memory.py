import weakref

import torch

device = "cuda" if torch.cuda.is_available() else "cpu"


def measure(retain):
    saved = []

    def pack(tensor):
        saved.append((weakref.ref(tensor), tensor.element_size() * tensor.nelement()))
        return tensor, tensor._version

    def unpack(packed):  # with the version check a pack hook switches off
        if packed[0]._version != packed[1]:
            raise RuntimeError("a saved tensor was modified by an inplace operation")
        return packed[0]

    x = torch.randn(2048, 2048, device=device, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
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
