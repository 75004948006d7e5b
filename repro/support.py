"""Helpers the scenarios share: graph depth and a count of live saved tensors."""

import weakref

import torch


def graph_depth(tensor):
    """Count the nodes on the longest path from tensor.grad_fn to the end of the graph."""
    if tensor.grad_fn is None:
        return 0
    depth = {}
    stack = [(tensor.grad_fn, False)]
    while stack:
        node, children_done = stack.pop()
        if node in depth:
            continue
        children = [child for child, _ in node.next_functions if child is not None]
        if children_done:
            depth[node] = 1 + max((depth[child] for child in children), default=0)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if child not in depth)
    return depth[tensor.grad_fn]


class _Saved:
    """What the graph holds instead of a saved tensor while SavedTensors is active."""

    def __init__(self, tensor):
        self.tensor = tensor


class SavedTensors(torch.autograd.graph.saved_tensors_hooks):
    """Count the tensors autograd has saved and not yet freed."""

    def __init__(self):
        self._live = weakref.WeakSet()
        super().__init__(self._pack, self._unpack)

    def __enter__(self):
        super().__enter__()
        return self

    def _pack(self, tensor):
        saved = _Saved(tensor)
        self._live.add(saved)
        return saved

    def _unpack(self, saved):
        return saved.tensor

    @property
    def alive(self):
        """How many saved tensors the graph still holds."""
        return len(self._live)
