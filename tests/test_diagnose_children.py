"""The diagnoser in the processes a script starts (issue 28): torch.multiprocessing.spawn's
workers, multiprocessing's forkserver and fork, subprocess Python children.

Each test runs the script plainly and under the diagnoser and compares what the reader sees
(exit status, stdout, stderr without the child's report lines, files written), then reads the
child's report from its prefixed lines: its cause and its lines."""

import os
import re
import subprocess
import sys

import pytest

from backtwice import diagnose

from .test_diagnose_robust import TIMEOUT, environment, line_of, write

pytestmark = pytest.mark.torch

# A child's report lines start with its rank (torch.multiprocessing.spawn) or its pid.
CHILD_LINE = re.compile(r"(?m)^\[(rank\d+|pid \d+)\]:(.*)\n")

# Worker 1 carries a state across steps; worker 0 trains cleanly.
SPAWN = """
    import torch
    import torch.multiprocessing as mp
    from torch import nn


    def worker(rank, steps):
        torch.manual_seed(rank)
        model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        h = torch.zeros(16, 1)
        for _ in range(steps):
            x = torch.randn(16, 4)
            h = 0.5 * h + model(x)  # forward
            loss = h.pow(2).mean()
            opt.zero_grad()
            loss.backward()  # raises
            opt.step()
            if rank == 0:
                h = h.detach()
        with open(f"done{rank}.txt", "w") as out:
            out.write("done")


    if __name__ == "__main__":
        mp.spawn(worker, args=(3,), nprocs=2)
"""

# One process started by multiprocessing with START, whose training raises.
PROCESS = """
    import multiprocessing

    import torch
    from torch import nn


    def work(seed):
        torch.manual_seed(seed)
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        h = torch.zeros(8, 1)
        for _ in range(3):
            h = torch.tanh(model(torch.randn(8, 4)) + h)  # forward
            opt.zero_grad()
            h.sum().backward()  # raises
            opt.step()


    if __name__ == "__main__":
        process = multiprocessing.get_context("START").Process(target=work, args=(0,))
        process.start()
        process.join()
        print("exit", process.exitcode)
"""

CHILD = """
    import sys

    import torch
    from torch import nn

    model = nn.Linear(3, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    h = torch.zeros(1, 3)
    for step in range(int(sys.argv[1])):
        h = torch.tanh(model.weight * h + 1.0)  # forward
        loss = h.sum()
        opt.zero_grad()
        loss.backward()  # raises
        opt.step()
        print("step", step)
"""

PARENT = """
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "child.py", "3"], capture_output=True, text=True)
    print("child exit", done.returncode)
    print(done.stdout, end="")
    sys.stderr.write(done.stderr)
    quiet = subprocess.run(
        [sys.executable, "-c", "import sys; print('torch' in sys.modules, 'site' in sys.modules)"],
        capture_output=True,
        text=True,
    )
    print("no torch child:", quiet.stdout.strip(), quiet.stderr.strip())
"""


def run(folder, *args, env=None):
    return subprocess.run(
        [sys.executable, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env or environment(),
        timeout=TIMEOUT,
    )


def steady(stderr):
    """stderr without what differs between two runs anyway: pids, times, which worker the
    launcher stopped."""
    stderr = re.sub(r"(?m)^W\d{4} .*Terminating process .*\n", "", stderr)
    return re.sub(r"\b\d{3,}\b", "N", stderr)


def compare(folder, *args):
    """Run plainly and diagnosed; assert the reader sees the same apart from the child reports;
    return {prefix: report text} of the children that reported."""
    plain = run(folder, *args)
    files = {p.name: p.read_text() for p in folder.iterdir() if p.suffix == ".txt"}
    for p in folder.glob("*.txt"):
        p.unlink()
    diagnosed = run(folder, "-m", "backtwice.diagnose", *args)
    assert diagnosed.returncode == plain.returncode, diagnosed.stderr
    assert diagnosed.stdout == plain.stdout
    assert steady(CHILD_LINE.sub("", diagnosed.stderr)) == steady(plain.stderr)
    assert {p.name: p.read_text() for p in folder.iterdir() if p.suffix == ".txt"} == files
    reports = {}
    for prefix, line in CHILD_LINE.findall(diagnosed.stderr):
        reports[prefix] = reports.get(prefix, "") + line + "\n"
    return reports


def lines_named(text):
    """{label: line number} of the report's labelled lines."""
    found, number = {}, None
    for line in text.splitlines():
        start = re.match(r"(\d+) \|", line)
        if start:
            number = int(start.group(1))
        elif re.search(r"built here", line):
            found["forward"] = number
        elif re.search(r"raised here", line):
            found["raises"] = number
    return found


def test_a_spawned_worker_reports_with_its_rank(tmp_path):
    script = write(tmp_path, "train.py", SPAWN)
    reports = compare(tmp_path, "train.py")
    assert list(reports) == ["rank1"], reports
    text = reports["rank1"]
    assert text.startswith("backtwice.diagnose: backward through a graph an earlier call freed")
    assert "\ncause: carried-state\n" in text and "  --> train.py\n" in text, text
    assert "<string>" not in text, text
    want = {"forward": line_of(script, "forward"), "raises": line_of(script, "raises")}
    assert lines_named(text) == want, text


@pytest.mark.parametrize("start", ["forkserver", "fork", "spawn"])
def test_a_multiprocessing_process_reports_with_its_pid(tmp_path, start):
    script = write(tmp_path, "train.py", PROCESS.replace("START", start))
    reports = compare(tmp_path, "train.py")
    assert len(reports) == 1 and next(iter(reports)).startswith("pid "), reports
    text = next(iter(reports.values()))
    assert "\ncause: carried-state\n" in text, text
    want = {"forward": line_of(script, "forward"), "raises": line_of(script, "raises")}
    assert lines_named(text) == want, text


def test_a_subprocess_child_reports_and_one_without_torch_does_not_import_it(tmp_path):
    child = write(tmp_path, "child.py", CHILD)
    write(tmp_path, "parent.py", PARENT)
    reports = compare(tmp_path, "parent.py")
    assert len(reports) == 1, reports
    text = next(iter(reports.values()))
    assert "\ncause: carried-state\n" in text and str(child) in text, text
    assert lines_named(text) == {
        "forward": line_of(child, "forward"),
        "raises": line_of(child, "raises"),
    }


def test_a_childs_own_sitecustomize_still_runs(tmp_path):
    site = tmp_path / "site"
    write(site, "sitecustomize.py", "import os\nos.environ['SITE_RAN'] = 'yes'\n")
    write(tmp_path, "child.py", "import os\nimport torch\nprint(os.environ.get('SITE_RAN'))\n")
    write(
        tmp_path,
        "parent.py",
        """
        import subprocess
        import sys

        done = subprocess.run([sys.executable, "child.py"], capture_output=True, text=True)
        print(done.stdout.strip(), repr(done.stderr))
        """,
    )
    env = environment()
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    plain = run(tmp_path, "parent.py", env=env)
    diagnosed = run(tmp_path, "-m", "backtwice.diagnose", "parent.py", env=env)
    assert plain.stdout == "yes ''\n" and diagnosed.stdout == plain.stdout, diagnosed.stderr
    assert diagnosed.returncode == plain.returncode == 0


BLOCK = """
    import torch
    import torch.multiprocessing as mp
    from torch import nn

    from backtwice.diagnose import diagnose


    def worker(rank):
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        feats = model(torch.randn(8, 4))  # forward
        with diagnose():
            for _ in range(2 if rank == 1 else 1):
                opt.zero_grad()
                feats.sum().backward()  # raises
                opt.step()


    if __name__ == "__main__":
        mp.spawn(worker, nprocs=2)
"""


def test_diagnose_block_in_a_spawned_worker_names_no_launcher_frame(tmp_path):
    script = write(tmp_path, "train.py", BLOCK)
    done = run(tmp_path, "train.py")
    assert done.returncode == 1
    reports = {}
    for prefix, line in CHILD_LINE.findall(done.stderr):
        reports[prefix] = reports.get(prefix, "") + line + "\n"
    assert list(reports) == ["rank1"], done.stderr
    assert "<string>" not in done.stderr and "called from" not in done.stderr, done.stderr
    want = {"forward": line_of(script, "forward"), "raises": line_of(script, "raises")}
    assert lines_named(reports["rank1"]) == want, reports


def test_the_runner_leaves_the_environment_as_it_was(tmp_path, monkeypatch):
    write(tmp_path, "clean.py", "print('ran')\n")
    monkeypatch.chdir(tmp_path)
    before = dict(os.environ)
    assert diagnose.main(["clean.py"]) == 0
    assert dict(os.environ) == before


def test_a_child_that_runs_the_diagnoser_itself_gets_the_runners_report(tmp_path):
    write(tmp_path, "child.py", CHILD)
    command = "[sys.executable, '-m', 'backtwice.diagnose', 'child.py', '3']"
    write(tmp_path, "parent.py", PARENT.replace('[sys.executable, "child.py", "3"]', command))
    done = run(tmp_path, "-m", "backtwice.diagnose", "parent.py")
    assert not CHILD_LINE.search(done.stderr), done.stderr  # the inner runner's, unprefixed
    lines = done.stderr.rstrip().splitlines()
    assert lines[-1].startswith("backtwice.diagnose: to try each fix on child.py"), done.stderr
    assert "Traceback (most recent call last):" in done.stderr.split("backtwice.diagnose:")[0]
