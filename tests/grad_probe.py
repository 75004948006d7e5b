"""Run a script plainly and print which parameters got a non-zero gradient, as JSON.

    python tests/grad_probe.py SCRIPT [ARGS...]

Written apart from the diagnoser, to check its `--try` verdicts: after each backward and
autograd.grad call it reads every parameter of the nn.Modules the script's globals hold (and
tensors there that require grad), and notes those with a non-zero gradient that an optimizer
there steps (all of them where there is no optimizer).
The last line of stdout is {"error": "Type: first line" or null, "trained": [names]}.
"""

import json
import os
import sys

import torch

trained = set()


def note(scope):
    # Where the script has optimizers, what they step: gradients of frozen weights train nothing.
    held = {
        id(p)
        for value in list(scope.values())
        if isinstance(value, torch.optim.Optimizer)
        for group in value.param_groups
        for p in group["params"]
    }
    for var, value in list(scope.items()):
        pairs = []
        if isinstance(value, torch.nn.Module):
            pairs = [(f"{var}.{n}", p) for n, p in value.named_parameters()]
        elif isinstance(value, torch.Tensor) and value.requires_grad and value.grad_fn is None:
            pairs = [(var, value)]
        for name, tensor in pairs:
            if held and id(tensor) not in held:
                continue
            if tensor.grad is not None and bool(tensor.grad.ne(0).any()):
                trained.add(name)


def main():
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    scope = {"__name__": "__main__", "__file__": script}
    backward, grad = torch.autograd.backward, torch.autograd.grad

    def noted_backward(*args, **kwargs):
        result = backward(*args, **kwargs)
        note(scope)
        return result

    def noted_grad(*args, **kwargs):
        result = grad(*args, **kwargs)
        note(scope)
        return result

    torch.autograd.backward, torch.autograd.grad = noted_backward, noted_grad
    error = None
    try:
        with open(script, encoding="utf-8") as handle:
            exec(compile(handle.read(), script, "exec"), scope)
    except Exception as exc:
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    print(json.dumps({"error": error, "trained": sorted(trained)}))


if __name__ == "__main__":
    main()
