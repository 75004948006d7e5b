"""The diagnoser where readers really run it (issue 28): however the process ends after the
error, under pytest and Hydra, `-m package.module`, --json through links, libraries on
PYTHONPATH, torchrun's ranks.

Each test runs the script plainly and under the diagnoser and compares what the reader sees
(exit status, stdout, stderr without the one report, files written), with the helpers of
test_diagnose_robust, then checks the report's cause and lines."""

import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from backtwice import diagnose

from .test_diagnose_robust import (
    BACKWARD_TWICE,
    TIMEOUT,
    compare,
    environment,
    line_of,
    load,
    own_stderr,
    plain,
    report_text,
    under,
    write,
)

# A training step whose error the script catches, then ends as END says.
CAUGHT = """
    import os
    import signal
    import sys
    import traceback

    import torch
    from torch import nn


    def train():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0.0
        for step in range(3):
            loss = model(torch.randn(5, 4)).pow(2).mean()  # forward
            total = total + loss
            opt.zero_grad()
            total.backward()  # raises
            opt.step()
            print("step", step, flush=True)


    def main():
        try:
            train()  # called
        except RuntimeError:
            traceback.print_exc()
            with open("written.txt", "w") as out:
                out.write("caught")
            print("caught, buffered")
            {end}
        return 0


    if __name__ == "__main__":
        sys.exit(main())
"""

ENDS = {
    "sys-exit-code": "return 3",
    "sys-exit-text": 'sys.exit("training failed")',
    "sys-exit-0": "return 0",
    "goes-on": 'print("went on")',
    "uncaught": "raise",
    "sigterm": "os.kill(os.getpid(), signal.SIGTERM)",
    "os-exit": "os._exit(4)",
    "os-exit-flushed": "sys.stdout.flush(); os._exit(0)",
    "fork-then-exit": "pid = os.fork()\n        if pid == 0: os._exit(0)\n"
    "        os.waitpid(pid, 0); return 2",
}


STATUS = {
    "sys-exit-code": 3,
    "sys-exit-text": 1,
    "sys-exit-0": 0,
    "goes-on": 0,
    "uncaught": 1,
    "sigterm": -signal.SIGTERM,
    "os-exit": 4,
    "os-exit-flushed": 0,
    "fork-then-exit": 2,
}


def files(folder):
    """{name: text} of what a run left in folder, the report aside."""
    return {p.name: p.read_text() for p in sorted(Path(folder).iterdir()) if p.suffix != ".json"}


def check_caught(script, report):
    assert report["cause"] == "carried-state", report
    assert report["raised"]["line"] == line_of(script, "raises")
    assert report["node"]["line"] == line_of(script, "forward")
    assert [c["line"] for c in report["raised"]["callers"]][:1] == [line_of(script, "called")]


# Ends that are the process's own (a signal, os._exit, a fork): in new interpreters.
FRESH_ENDS = {"sigterm", "os-exit", "os-exit-flushed", "fork-then-exit"}


@pytest.mark.parametrize(
    "end",
    [pytest.param(e, marks=pytest.mark.fresh) if e in FRESH_ENDS else e for e in sorted(ENDS)],
)
def test_report_reaches_stderr_however_the_process_ends(tmp_path, end):
    if end == "fork-then-exit" and not hasattr(os, "fork"):
        pytest.skip("no fork here")
    script = write(tmp_path, "train.py", CAUGHT.format(end=ENDS[end]))
    first = plain(tmp_path, script.name)
    written = files(tmp_path)
    (tmp_path / "written.txt").unlink()
    first, second, report = compare(tmp_path, [script.name], first=first)
    assert files(tmp_path) == written == {"train.py": script.read_text(), "written.txt": "caught"}
    assert first.returncode == STATUS[end]
    assert BACKWARD_TWICE in first.stderr
    check_caught(script, report)


# ---- pytest and Hydra catch the error and exit through SystemExit ----------------------------

TRAIN_LIB = """
    import torch
    from torch import nn


    def train(steps=3):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0.0
        for step in range(steps):
            loss = model(torch.randn(5, 4)).pow(2).mean()  # forward
            total = total + loss
            opt.zero_grad()
            total.backward()  # raises
            opt.step()
        return total
"""


def without_times(text):
    return re.sub(r"in \d+\.\d+s", "in TIME", text)


def test_pytest_on_a_failing_test(tmp_path):
    lib = write(tmp_path, "trainlib.py", TRAIN_LIB)
    write(
        tmp_path,
        "test_train.py",
        "from trainlib import train\n\n\ndef test_train():\n    train()\n",
    )
    args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_train.py"]
    first = plain(tmp_path, *args)
    first.stdout = without_times(first.stdout)
    out = tmp_path.parent / "pytest-report.json"
    second = under(tmp_path, "--json", str(out), *args)
    second.stdout = without_times(second.stdout)
    report = load(out)
    assert second.returncode == first.returncode == 1
    assert second.stdout == first.stdout and "1 failed" in first.stdout
    assert BACKWARD_TWICE in first.stdout
    assert own_stderr(second.stderr, report) == first.stderr
    assert report["cause"] == "carried-state"
    assert report["raised"]["line"] == line_of(lib, "raises")
    assert report["node"]["line"] == line_of(lib, "forward")


HYDRA_APP = """
    import hydra

    from trainlib import train


    @hydra.main(version_base=None, config_path=None)
    def main(cfg):
        train(cfg.get("steps", 3))  # called


    if __name__ == "__main__":
        main()
"""


def test_hydra_main(tmp_path):
    pytest.importorskip("hydra", reason="hydra-core is not installed (the test extra has it)")
    lib = write(tmp_path, "trainlib.py", TRAIN_LIB)
    app = write(tmp_path, "app.py", HYDRA_APP)
    args = [
        app.name,
        "hydra.run.dir=run",
        "hydra.output_subdir=null",
        "hydra/job_logging=none",
        "hydra/hydra_logging=none",
        "+steps=3",
    ]
    first = plain(tmp_path, *args)
    assert not (tmp_path / "run").exists() or not list((tmp_path / "run").iterdir())
    first, second, report = compare(tmp_path, args, first=first)
    assert first.returncode == 1 and BACKWARD_TWICE in first.stderr
    assert report["cause"] == "carried-state"
    assert report["raised"]["line"] == line_of(lib, "raises")
    assert report["node"]["line"] == line_of(lib, "forward")


# ---- -m package.module -----------------------------------------------------------------------

MODULE_MAIN = """
    import sys

    from .trainlib import train

    print(sys.argv[1:], __name__, __package__, sys.path[0] == __import__("os").getcwd())
    train()  # called
"""


@pytest.mark.fresh  # `python -m`'s own start
def test_dash_m_runs_a_package_module_as_python_does(tmp_path):
    lib = write(tmp_path, "trainer/trainlib.py", TRAIN_LIB)
    write(tmp_path, "trainer/__init__.py", "")
    write(tmp_path, "trainer/train.py", MODULE_MAIN)
    first, second, report = compare(tmp_path, ["-m", "trainer.train", "--lr", "1", "--"])
    assert first.returncode == 1 and "['--lr', '1', '--'] __main__ trainer True" in first.stdout
    assert "_run_module_as_main" in first.stderr  # the same frames as a plain run's
    assert report["cause"] == "carried-state"
    assert report["raised"]["line"] == line_of(lib, "raises")
    assert report["raised"]["file"] == str(lib)


@pytest.mark.fresh  # `python -m`'s own start
def test_dash_m_after_double_dash_and_a_missing_module(tmp_path):
    write(tmp_path, "trainer/__init__.py", "")
    write(tmp_path, "trainer/__main__.py", "import sys\nprint(sys.argv[1:])\n")
    first = plain(tmp_path, "-m", "trainer", "x")
    second = under(tmp_path, "--", "-m", "trainer", "x")
    assert (second.returncode, second.stdout, second.stderr) == (0, "['x']\n", "")
    assert (first.returncode, first.stdout, first.stderr) == (0, "['x']\n", "")
    first, second = plain(tmp_path, "-m", "nothere"), under(tmp_path, "-m", "nothere")
    assert (second.returncode, second.stdout, second.stderr) == (1, "", first.stderr)
    second = under(tmp_path, "-m")
    assert second.returncode == 2 and second.stderr.startswith("-m: needs a MODULE\n")


# ---- --json through a link, to a device, with the umask --------------------------------------

SHORT = """
    import torch

    w = torch.ones(3, requires_grad=True)
    loss = (w * w).sum()  # forward
    loss.backward()
    loss.backward()  # raises
"""


def test_json_writes_through_a_link_and_honours_the_umask(tmp_path):
    write(tmp_path, "train.py", SHORT)
    target = tmp_path.parent / "reports" / "report.json"
    target.parent.mkdir()
    link = tmp_path / "report.json"
    link.symlink_to(target)
    args = [sys.executable, "-m", "backtwice.diagnose", "--json", "report.json", "train.py"]
    done = subprocess.run(
        args,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=environment(),
        timeout=TIMEOUT,
        umask=0o027,
    )
    assert done.returncode == 1, done.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert load(target)["cause"] == "same-loss-twice"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    target.chmod(0o604)  # an existing file keeps its mode
    subprocess.run(args, cwd=tmp_path, capture_output=True, env=environment(), timeout=TIMEOUT)
    assert stat.S_IMODE(target.stat().st_mode) == 0o604 and link.is_symlink()


def test_json_to_stdout_is_appended_and_a_device_is_refused(tmp_path):
    write(tmp_path, "train.py", SHORT)
    second = under(tmp_path, "--json", "/dev/stdout", "train.py")
    assert second.returncode == 1 and os.path.islink("/dev/stdout")
    report = diagnose.json.loads(second.stdout)
    assert report["cause"] == "same-loss-twice" and report_text(report) in second.stderr
    second = under(tmp_path, "--json", "/dev/zero", "train.py")
    assert second.returncode == 2 and second.stdout == ""
    assert second.stderr == (
        "--json /dev/zero: is a device, not a file, a pipe or a terminal; give a file name;"
        " nothing was run\n"
    )


# ---- libraries on PYTHONPATH -----------------------------------------------------------------

FIT = """
    from fitlib import fit

    fit(3)  # called
"""


@pytest.mark.parametrize("installed", ["distribution", "plain-folder", "egg-info"], ids=str)
def test_an_installed_distribution_on_pythonpath_is_not_the_readers(tmp_path, installed):
    site = tmp_path / "site"
    lib = write(site, "fitlib/__init__.py", TRAIN_LIB.replace("def train(", "def fit("))
    if installed == "egg-info":  # a checkout built in place (pip install -e): not installed
        write(site, "fitlib.egg-info/PKG-INFO", "Metadata-Version: 2.1\nName: fitlib\n")
        write(site, "fitlib.egg-info/SOURCES.txt", "fitlib/__init__.py\n")
    if installed == "distribution":  # what an installer writes: metadata, the files it owns
        write(
            site,
            "fitlib-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: fitlib\nVersion: 1.0\n",
        )
        write(
            site,
            "fitlib-1.0.dist-info/RECORD",
            "fitlib/__init__.py,,\n"
            "fitlib-1.0.dist-info/METADATA,,\nfitlib-1.0.dist-info/RECORD,,\n",
        )
    script = write(tmp_path, "train.py", FIT)
    env = environment()
    env["PYTHONPATH"] += os.pathsep + str(site)
    out = tmp_path / "report.json"
    for args in ([script.name], ["--json", str(out), script.name]):
        done = subprocess.run(
            [sys.executable, *(["-m", "backtwice.diagnose"] if len(args) > 1 else []), *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT,
        )
        assert done.returncode == 1
    report = load(out)
    assert report["cause"] == "carried-state"
    if installed == "distribution":
        assert report["raised"]["file"] == "train.py", report
        assert report["raised"]["line"] == line_of(script, "called")
    else:
        assert report["raised"]["file"] == str(lib)
        assert report["raised"]["line"] == line_of(lib, "raises")


# ---- torchrun's ranks ------------------------------------------------------------------------


@pytest.mark.parametrize("world", ["2", "1"])
def test_each_report_line_has_the_rank_under_torchrun(tmp_path, world):
    write(tmp_path, "train.py", SHORT)
    env = dict(environment(), RANK="1", LOCAL_RANK="1", WORLD_SIZE=world)
    done = subprocess.run(
        [sys.executable, "-m", "backtwice.diagnose", "--json", "r.json", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
    )
    text = report_text(load(tmp_path / "r.json"))
    prefix = "[rank1]:" if world == "2" else ""
    shown = "\n".join(prefix + line for line in text.split("\n"))
    assert done.returncode == 1 and done.stderr.count(shown + "\n") == 1, done.stderr
    assert done.stderr.startswith("Traceback (most recent call last):")
