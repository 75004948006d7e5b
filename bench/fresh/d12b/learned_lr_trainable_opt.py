# expect-cause: carried-state
import torch
import torch.nn as nn
from collections import OrderedDict
from torch.func import functional_call


class MySGD:
    """Inner optimizer whose step size is produced by a trainable model (eta)."""
    def __init__(self, params, trainable_opt_params, trainable_opt_state):
        self.names = [n for n, _ in params]
        self.trainable_opt_params = trainable_opt_params
        self.trainable_opt_state = trainable_opt_state

    def step(self, loss, fast_params):
        grads = torch.autograd.grad(loss, list(fast_params.values()), create_graph=True)
        prev_lr = self.trainable_opt_state['prev_lr']
        g_norm = torch.stack([g.norm() for g in grads]).mean().view(1, 1)
        lr = self.trainable_opt_params['eta'](torch.cat([prev_lr, g_norm], 1))  # expect: forward
        self.trainable_opt_state['prev_lr'] = lr
        return OrderedDict((n, p - lr.squeeze() * g) for (n, p), g in zip(fast_params.items(), grads))


def main():
    torch.manual_seed(0)
    child_model = nn.Sequential(OrderedDict([('fc1', nn.Linear(4, 16)), ('relu', nn.ReLU()),
                                             ('fc2', nn.Linear(16, 1))]))
    eta = nn.Sequential(OrderedDict([('fc', nn.Linear(2, 1)), ('act', nn.Softplus())]))
    hidden = nn.Parameter(0.1 * torch.ones(1, 1))
    meta_params = [hidden] + list(eta.parameters()) + list(child_model.parameters())
    meta_opt = torch.optim.Adam(meta_params, lr=1e-3)
    criterion = nn.MSELoss()
    trainloader = [(torch.randn(32, 4), torch.randn(32, 1)) for _ in range(5)]
    testloader = [(torch.randn(32, 4), torch.randn(32, 1)) for _ in range(5)]

    trainable_opt_params = {'eta': eta, 'hidden': hidden}
    trainable_opt_state = {'prev_lr': hidden}
    nb_outer_steps, nb_inner_steps = 3, 3
    for outer_i, (outer_inputs, outer_targets) in enumerate(testloader, 0):
        meta_opt.zero_grad()
        if outer_i >= nb_outer_steps:
            break
        inner_opt = MySGD(list(child_model.named_parameters()), trainable_opt_params, trainable_opt_state)
        fast_params = OrderedDict(child_model.named_parameters())
        for inner_i, (inner_inputs, inner_targets) in enumerate(trainloader, 0):
            if inner_i >= nb_inner_steps:
                break
            logits = functional_call(child_model, fast_params, (inner_inputs,))
            inner_loss = criterion(logits, inner_targets)
            fast_params = inner_opt.step(inner_loss, fast_params)
        outer_outputs = functional_call(child_model, fast_params, (outer_inputs,))
        meta_loss = criterion(outer_outputs, outer_targets)
        meta_loss.backward()  # expect: raises frees
        meta_opt.step()
        print(f'outer_i={outer_i} meta_loss={meta_loss.item():.4f} lr={trainable_opt_state["prev_lr"].item():.4f}')


if __name__ == "__main__":
    main()
