"""Time an MLP training step plainly, under the diagnoser and under anomaly mode.

    python bench/diagnose.py [--steps N]

Three Linear layers, batch 64, Adam, one thread; 256 wide (the target: the diagnoser at most
1.3 times the plain step and below anomaly mode) and 32 wide (where Python overhead dominates).
Each mode runs its steps in turns with the others, so drift on a shared machine hits all three;
the figure is the median step time.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from backtwice.diagnose import diagnose  # noqa: E402

TARGET = 1.3


def make(width):
    """A seeded model, optimizer and batch."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1)
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x, y = torch.randn(64, width), torch.randn(64, 1)
    return model, opt, x, y


def step(model, opt, x, y):
    """One training step; returns its time in seconds."""
    start = time.perf_counter()
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return time.perf_counter() - start


def run_mode(mode, parts, rounds):
    """Time `rounds` steps in one mode."""
    if mode == "diagnoser":
        with diagnose():
            return [step(*parts) for _ in range(rounds)]
    if mode == "anomaly":
        with torch.autograd.set_detect_anomaly(True):
            return [step(*parts) for _ in range(rounds)]
    return [step(*parts) for _ in range(rounds)]


def measure(width, steps):
    """Median step time per mode, modes interleaved in blocks of 20 steps."""
    modes = ("plain", "diagnoser", "anomaly")
    parts = {mode: make(width) for mode in modes}
    times = {mode: [] for mode in modes}
    for mode in modes:  # warm up
        run_mode(mode, parts[mode], 20)
    for _ in range(max(1, steps // 20)):
        for mode in modes:
            times[mode].extend(run_mode(mode, parts[mode], 20))
    return {mode: statistics.median(values) for mode, values in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps per mode (default 1000)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    met = True
    for width in (256, 32):
        medians = measure(width, args.steps)
        plain = medians["plain"]
        diag, anomaly = medians["diagnoser"] / plain, medians["anomaly"] / plain
        print(
            f"{width:>3} wide: plain {plain * 1e6:7.1f} us, diagnoser {diag:.2f}x, "
            f"anomaly mode {anomaly:.2f}x"
        )
        if width == 256:
            met = diag <= TARGET and diag < anomaly
    print(
        f"target (256 wide: diagnoser <= {TARGET}x and below anomaly mode): {'met' if met else 'MISSED'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
