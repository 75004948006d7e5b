"""A custom autograd.Function whose ctx.saved_tensors a debugging hook reads after backward."""

# expect-cause: saved-read
import torch
from torch import nn


class ScaledTanh(torch.autograd.Function):
    last_ctx = None

    @staticmethod
    def forward(ctx, x):
        out = torch.tanh(x) * 1.7
        ctx.save_for_backward(out)
        ScaledTanh.last_ctx = ctx
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1.7 - out * out / 1.7)


torch.manual_seed(0)
layer = nn.Linear(3, 3)
opt = torch.optim.SGD(layer.parameters(), lr=0.1)
y = ScaledTanh.apply(layer(torch.randn(5, 3)))  # expect: forward
opt.zero_grad()
y.sum().backward()  # expect: frees
opt.step()
(activations,) = ScaledTanh.last_ctx.saved_tensors  # expect: raises
print(activations.shape)
