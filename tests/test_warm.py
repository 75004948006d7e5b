"""tests/warm.py's forks give what a fresh `python ARGS` gives: the same exit status, stdout,
stderr and files, for scripts that lean on what the fork imitates (argv and sys.path[0], a
fresh `__main__`, tracebacks, SystemExit, KeyboardInterrupt, threads, atexit, files left
open, `-m`, folders), plainly and under the diagnoser (`-m backtwice.diagnose`, the reader's
entry). The diagnoser tests compare a plain and a diagnosed run both made in forks; this keeps
the forks honest."""

import textwrap

import pytest

from . import warm
from .test_diagnose_robust import TIMEOUT, environment

SCRIPTS = {
    "where.py": """
        import sys

        import torch

        print(sys.argv, __name__, __file__, sys.path[0], sorted(globals()))
        print(torch.get_num_threads(), sys.flags.dont_write_bytecode, "numpy" in sys.modules)
        """,
    "train.py": """
        import torch
        from torch import nn

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0.0
        for step in range(3):
            loss = model(torch.randn(5, 4)).pow(2).mean()
            total = total + loss
            opt.zero_grad()
            total.backward()
            opt.step()
            print("step", step, repr(loss.item()))
        """,
    "ends.py": """
        import atexit
        import sys
        import threading
        import time

        atexit.register(print, "atexit ran")
        log = open("left-open.txt", "w")
        log.write("written at exit")


        def late():
            time.sleep(0.2)
            print("thread done")


        threading.Thread(target=late).start()
        how = sys.argv[1]
        if how == "raise":
            raise ValueError("the script's own error")
        if how == "interrupt":
            raise KeyboardInterrupt
        sys.exit(int(how) if how.isdigit() else how)
        """,
    "broken.py": "import torch\nx = (1,\n",
    "pkg/__init__.py": "",
    "pkg/__main__.py": "import sys\nprint(__name__, __package__, sys.argv, sys.path[0])\n",
    "pkg/fails.py": "def f():\n    return 1 / 0\n\n\nf()\n",
}

COMMANDS = [
    ["where.py", "--lr", "0.1"],
    ["./where.py"],
    ["sub/../where.py"],
    ["train.py"],
    ["ends.py", "raise"],
    ["ends.py", "interrupt"],
    ["ends.py", "3"],
    ["ends.py", "a text"],
    ["broken.py"],
    ["missing.py"],
    ["pkg", "x"],
    ["-m", "pkg.fails"],
    ["-m", "nothere"],
    ["-m", "backtwice.diagnose", "train.py"],
    ["-m", "backtwice.diagnose", "--json", "report.json", "ends.py", "raise"],
    ["-m", "backtwice.diagnose", "ends.py", "interrupt"],
    ["-m", "backtwice.diagnose", "-m", "pkg", "y"],
]


def seen(process, folder):
    """What a reader sees of a run: status, output, the files it left (then removed)."""
    left = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix in (".txt", ".json"):
            left[path.name] = path.read_text()
            path.unlink()
    return process.returncode, process.stdout, process.stderr, left


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_warm_run_is_what_a_fresh_python_gives(tmp_path, args):
    for name, source in SCRIPTS.items():
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(textwrap.dedent(source).lstrip())
    (tmp_path / "sub").mkdir()
    env = environment()
    expected = seen(warm.fresh(args, tmp_path, env, TIMEOUT), tmp_path)
    assert seen(warm.run(args, tmp_path, env, TIMEOUT), tmp_path) == expected
