"""Time the build against importing torch: python bench/speed.py [--runs N] [--render-only].

Prints the median wall time of `python build.py`, of `python -c "import torch"`, their ratio,
the same for one SGD step in a fresh interpreter (the floor for any capture that trains a
model: torch's optimizers import torch._dynamo on first use; target: the build within 1.25x of
it; also as the median of each turn's ratio, which a machine whose speed drifts moves less),
of `python build.py --every-case` (a build that runs every diagnoser case again, as
--check and --recapture do, where a build reuses those whose inputs did not change: the flag is
there for this bench), the median of `python build.py --render-only` and its least of 7
(target: under 0.5 s), of the same render in this process once its modules are imported (target: under 0.25 s), and what the checker's
loops and their fixes add to a capture once torch is imported (target: 0.3 s for the 16 loops
there were when it was set, so under 19 ms a loop, their forks included). Every
scenario and loop runs in its own fork of the capture interpreter; it also prints how long that
interpreter takes to be ready (import torch, warm-up, while the jobs that name no optimizer
already run) and how long the jobs take after that. `--render-only` times only
`python build.py --render-only` as a whole process, the least of 7 runs (target: under 0.5 s),
which the full bench prints too.

The build uses every core and the floor one: on a machine that others load, the ratio grows
with their load. Say what the load was (`uptime`) with the numbers.
"""

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backtwice import capture, cli, manifest  # noqa: E402

# The least a capture with real training steps can cost: torch, a model, one optimizer step.
ONE_STEP = (
    "import torch; m = torch.nn.Linear(2, 1); o = torch.optim.SGD(m.parameters(), lr=0.1); "
    "o.zero_grad(); m(torch.ones(2)).sum().backward(); o.step()"
)


def turns(commands, runs):
    """Run each command `runs` times, taking turns, so that a machine busier at one moment
    than another weighs on all alike; return each command's wall times in seconds, by turn."""
    times = [[] for _ in commands]
    for _ in range(runs):
        for command, taken in zip(commands, times, strict=True):
            started = time.perf_counter()
            subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
            taken.append(time.perf_counter() - started)
    return times


def job_seconds(jobs, runs):
    """Median seconds until the child is ready (torch imported, warmed up), and median
    seconds it then spends until these jobs have all run."""
    ready, times = [], []
    for _ in range(runs):
        started = time.perf_counter()
        _, _, seconds = capture.run_child(sys.executable, manifest.load(ROOT / "repro"), jobs)
        times.append(seconds)
        ready.append(time.perf_counter() - started - seconds)
    return statistics.median(ready), statistics.median(times)


def render_only_min(out, runs=7):
    """The least wall time of `python build.py --render-only` as a whole process, in seconds:
    Python's start, the imports and the render, as a user's command takes them."""
    (times,) = turns([[sys.executable, "build.py", "--render-only", *out]], runs)
    return min(times)


def render_in_process(out, runs):
    """Median seconds of `--render-only` run in this process, its modules already imported."""
    import backtwice.render  # noqa: F401  # imported once, as a long-lived process would

    times = []
    for _ in range(runs):
        started = time.perf_counter()
        assert cli.main(["--render-only", *out]) == 0
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--render-only", action="store_true", help="time only the render")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        snaps = Path(tmp) / "snapshots"
        shutil.copytree(ROOT / "snapshots", snaps)
        out = ["--snapshots", str(snaps), "--out", str(Path(tmp) / "site"), "--quiet"]
        render_min = render_only_min(out)
        if args.render_only:
            print(f"python build.py --render-only {render_min:6.2f} s   (least of 7; target < 0.5)")
            return
        times = turns(
            [
                [sys.executable, "-c", ONE_STEP],
                [sys.executable, "build.py", *out],
                [sys.executable, "build.py", "--every-case", *out],
                [sys.executable, "-c", "import torch"],
                [sys.executable, "build.py", "--render-only", *out],
            ],
            args.runs,
        )
        step, build, every_case, torch, render = map(statistics.median, times)
        # A machine whose speed drifts (a shared host) moves two commands run one after the
        # other alike: the step, then the build.
        per_turn = statistics.median(b / s for s, b in zip(times[0], times[1], strict=True))
        in_process = render_in_process(out, args.runs)
    repro = ROOT / "repro"
    loops = capture.loop_jobs(manifest.load_loop_builder(repro), repro)
    _, loop_time = job_seconds(loops, args.runs)
    loaded = manifest.load(repro)
    every = capture.scenario_jobs(loaded.scenarios) + loops + capture.case_jobs(loaded.cases)
    ready, jobs_time = job_seconds(every, args.runs)
    print(f"python build.py               {build:6.2f} s (median of {args.runs})")
    print(f'python -c "import torch"      {torch:6.2f} s')
    print(f"ratio                         {build / torch:6.2f}")
    print(f"one SGD step, fresh process   {step:6.2f} s   ({step / torch:.2f} x import torch)")
    print(f"build / one SGD step          {build / step:6.2f}   (target <= 1.25)")
    print(
        f"  the same, median of turns     {per_turn:6.2f}   (each build against the step just before it)"
    )
    print(
        f"build.py --every-case         {every_case:6.2f} s   ({every_case / step:.2f} x the step: "
        "every diagnoser case run again)"
    )
    print(f"python build.py --render-only {render:6.2f} s   (median of {args.runs})")
    print(f"  the least of 7                {render_min:6.2f} s   (target < 0.5)")
    print(f"the same render in process    {in_process:6.2f} s   (target < 0.25)")
    print(
        f"the {len(loops)} checker loop runs    {loop_time:6.2f} s   ({1000 * loop_time / len(loops):.0f} ms a loop, "
        "target < 19 ms: 0.3 s for 16; torch already imported)"
    )
    print(f"capture interpreter ready     {ready:6.2f} s   (import torch, warm-up, early jobs)")
    print(f"then all {len(every)} jobs          {jobs_time:6.2f} s")


if __name__ == "__main__":
    main()
