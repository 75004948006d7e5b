"""Helpers the scenarios share: graph depth and a count of live saved tensors."""

import os
import time
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
        self.version = tensor._version
        grad_fn = tensor.grad_fn
        self.made_by = None if grad_fn is None else (tensor.output_nr, grad_fn.name())


def modified_message(saved):
    """The message torch raises when a saved tensor was modified in place, for this one.

    It names the node that made the tensor as torch does for parameters, leaves, views and
    outputs saved by their own node; for an intermediate saved as another node's input and
    then modified in place, torch names the in-place operation instead.
    """
    tensor = saved.tensor
    shape = "[" + ", ".join(str(size) for size in tensor.shape) + "]"
    text = "one of the variables needed for gradient computation has been modified by an inplace operation: "
    text += f"[{tensor.type()} {shape}]"
    made_by = saved.made_by
    if tensor._is_view() and tensor.grad_fn is not None:  # torch regenerates a view's grad_fn
        made_by = (tensor.output_nr, tensor.grad_fn.name())
    if made_by is not None:
        output, name = made_by
        name = name[: -len("Backward0")] if name.endswith("Backward0") else name
        text += f", which is output {output} of {name},"
    text += f" is at version {tensor._version}; expected version {saved.version} instead. Hint: "
    if torch.is_anomaly_enabled():
        return text + (
            "the backtrace further above shows the operation that failed to compute its"
            " gradient. The variable in question was changed in there or anywhere later. Good luck!"
        )
    return text + (
        "enable anomaly detection to find the operation that failed to compute its gradient,"
        " with torch.autograd.set_detect_anomaly(True, check_nan=False)."
    )


class SavedTensors(torch.autograd.graph.saved_tensors_hooks):
    """Count the tensors autograd has saved and not yet freed.

    Pack and unpack hooks switch off autograd's check that a saved tensor was not modified in
    place; the unpack hook makes that check itself, comparing _version, and raises as torch does.
    """

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
        if saved.tensor._version != saved.version:
            raise RuntimeError(modified_message(saved))
        return saved.tensor

    @property
    def alive(self):
        """How many saved tensors the graph still holds."""
        return len(self._live)


def two_gloo_ranks(train):
    """Run train(rank) in two forked processes, a gloo process group on 127.0.0.1 at a free
    port, and return what rank 0's train returned, its tensors made in this process.

    The scenario's own process starts no gloo thread, so each of its runs forks cleanly; each
    rank leaves with os._exit, since an exit through gloo's teardown hung now and then here.
    """
    import socket

    import torch.distributed as dist
    import torch.multiprocessing as mp

    def rank_main(rank, port, results):
        dist.init_process_group("gloo", f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
        rows = train(rank)
        if rank == 0:
            results.put([[t.tolist() if torch.is_tensor(t) else t for t in row] for row in rows])
        dist.destroy_process_group()
        os._exit(0)

    # Two processes forked from a capture's fork now and then wait forever on each other (one
    # capture in a few dozen here): such a pair is killed after 20 s and started again.
    for _attempt in range(3):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        results = mp.get_context("fork").SimpleQueue()
        ranks = mp.start_processes(
            rank_main, args=(port, results), nprocs=2, start_method="fork", join=False
        )
        deadline = time.monotonic() + 20
        while not ranks.join(timeout=0.5):
            if time.monotonic() > deadline:
                for process in ranks.processes:
                    process.kill()
                    process.join()
                break
        else:
            rows = results.get()
            return [[torch.tensor(v) if isinstance(v, list) else v for v in row] for row in rows]
    raise RuntimeError("two gloo processes did not finish in three tries")
