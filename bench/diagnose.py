"""Time training steps plainly, under the diagnoser and under anomaly mode; check its memory.

    python bench/diagnose.py [--steps N] [--memory-steps N]

An MLP (three Linear layers, 256 wide, batch 64, Adam) and a small GRU (one layer, 32 wide,
20 time steps, batch 16, Adam), one thread. Targets: the diagnoser at most 1.15x the plain step
on the MLP and 1.3x on the GRU, and below anomaly mode on both. Also timed, as the floor any
saved-tensor recorder stands on: bare hooks, which keep only what torch's in-place check needs
(a detached tensor and its version) and check it, and below that empty hooks, which return
what they are given: the cost of torch calling Python twice per saved tensor. Each mode runs its steps in turns with the
others, so drift on a shared machine hits all of them; the figure is the median step time.
Then 10,000 MLP steps (32 wide) under the diagnoser: the Python memory it holds must not grow.
"""

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from backtwice.diagnose import diagnose  # noqa: E402

TARGETS = {"mlp": 1.15, "gru": 1.3}
GROWTH_LIMIT = 64 * 1024  # bytes of Python memory the diagnoser may gain from 1,000 to N steps


class GRUModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 32, batch_first=True)
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(self.gru(x)[0][:, -1])


def make(kind, width=256):
    """A seeded model, optimizer and batch."""
    torch.manual_seed(0)
    if kind == "gru":
        model = GRUModel()
        x, y = torch.randn(16, 20, 8), torch.randn(16, 1)
    else:
        model = nn.Sequential(
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, width),
            nn.ReLU(),
            nn.Linear(width, 1),
        )
        x, y = torch.randn(64, width), torch.randn(64, 1)
    return model, torch.optim.Adam(model.parameters(), lr=1e-4), x, y


def step(model, opt, x, y):
    """One training step; returns its time in seconds."""
    start = time.perf_counter()
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return time.perf_counter() - start


def keep(tensor):
    """A bare pack hook: what torch's in-place check needs."""
    return tensor.detach(), tensor._version


def give(saved):
    """A bare unpack hook: torch's in-place check, which hooks switch off."""
    if saved[0]._version != saved[1]:
        raise RuntimeError("a saved tensor was modified by an inplace operation")
    return saved[0]


def same(value):
    """An empty hook: pack or unpack, it gives back what it got."""
    return value


def run_mode(mode, parts, rounds):
    """Time `rounds` steps in one mode."""
    if mode == "empty hooks":
        with torch.autograd.graph.saved_tensors_hooks(same, same):
            return [step(*parts) for _ in range(rounds)]
    if mode == "bare hooks":
        with torch.autograd.graph.saved_tensors_hooks(keep, give):
            return [step(*parts) for _ in range(rounds)]
    if mode == "diagnoser":
        with diagnose():
            return [step(*parts) for _ in range(rounds)]
    if mode == "anomaly":
        with torch.autograd.set_detect_anomaly(True):
            return [step(*parts) for _ in range(rounds)]
    return [step(*parts) for _ in range(rounds)]


def measure(kind, steps):
    """Median step time per mode, modes interleaved in blocks of 20 steps."""
    modes = ("plain", "diagnoser", "anomaly", "bare hooks", "empty hooks")
    parts = {mode: make(kind) for mode in modes}
    times = {mode: [] for mode in modes}
    for mode in modes:  # warm up
        run_mode(mode, parts[mode], 20)
    for _ in range(max(1, steps // 20)):
        for mode in modes:
            times[mode].extend(run_mode(mode, parts[mode], 20))
    return {mode: statistics.median(values) for mode, values in times.items()}


def memory(steps):
    """Python memory held after 1,000 steps and after `steps` steps under the diagnoser."""
    parts = make("mlp", width=32)
    tracemalloc.start()
    with diagnose():
        for number in range(1, steps + 1):
            step(*parts)
            if number == 1000:
                early = tracemalloc.get_traced_memory()[0]
        late = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return early, late


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps per mode (default 1000)")
    parser.add_argument("--memory-steps", type=int, default=10000, help="default 10000")
    args = parser.parse_args()
    torch.set_num_threads(1)
    met = True
    for kind, name in (("mlp", "MLP 256 wide"), ("gru", "GRU 32 wide, 20 steps")):
        medians = measure(kind, args.steps)
        plain = medians["plain"]
        diag, anomaly = medians["diagnoser"] / plain, medians["anomaly"] / plain
        ok = diag <= TARGETS[kind] and diag < anomaly
        met = met and ok
        print(
            f"{name}: plain {plain * 1e6:7.1f} us, diagnoser {diag:.2f}x "
            f"(target {TARGETS[kind]}x), anomaly mode {anomaly:.2f}x, "
            f"bare hooks {medians['bare hooks'] / plain:.2f}x, "
            f"empty hooks {medians['empty hooks'] / plain:.2f}x: {'met' if ok else 'MISSED'}"
        )
    early, late = memory(args.memory_steps)
    grew = late - early
    ok = grew <= GROWTH_LIMIT
    met = met and ok
    print(
        f"memory under the diagnoser: {early / 1024:.1f} KiB after 1,000 steps, "
        f"{late / 1024:.1f} KiB after {args.memory_steps:,} ({grew / 1024:+.1f} KiB, "
        f"limit +{GROWTH_LIMIT // 1024} KiB): {'met' if ok else 'MISSED'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
