"""tests/warm_capture.py's shim gives what the real capture interpreter gives: the same
snapshot, the same exit and the same end on a signal. The build tests capture through it; this
keeps it honest. (test_cli's check of the committed snapshot, and its `checked` build through
the shim, compare every scenario, loop and case with what real interpreters captured.)"""

import os
import signal
import subprocess
import sys
import time

import pytest

from backtwice.capture import capture

from . import warm_capture
from .conftest import alive
from .test_capture import KNOWN, LATE, NUMERICS, write_repro

SCRIPT = """\
import os, sys, time
os.write(int(sys.argv[1]), b"channel")
print(os.getcwd(), sys.argv[0], len(sys.argv), os.environ.get("WARM_TEST"))  # not the fd
print("to stderr", file=sys.stderr)
with open("pid", "w") as handle:
    handle.write(str(os.getpid()))
if os.environ.get("WARM_TEST") == "sleep":
    time.sleep(60)
sys.exit(3)
"""


@pytest.mark.fresh  # the real interpreter beside the shim: Child is not redirected
def test_a_capture_through_the_shim_is_the_real_capture(tmp_path):
    scenarios = dict(KNOWN, numerics=("runs", NUMERICS, 60))
    scenarios["late"] = ("runs", "import sys\nprint(sorted(sys.argv))\n" + LATE, 30)
    repro = write_repro(tmp_path / "repro", scenarios)
    real = capture(repro, python=sys.executable, say=lambda _: None, today="2026-01-01")
    warm = capture(repro, python=warm_capture.shim(), say=lambda _: None, today="2026-01-01")
    assert warm == real
    assert real.scenarios["twice"].raised is not None  # the comparison saw an error, and a loop
    assert real.scenarios["numerics"].outputs


def run(python, tmp_path, value, stop=None):
    """Run SCRIPT as the capture runs the harness (a channel descriptor in its arguments);
    return (the completed process, what came on the channel, the script's pid)."""
    script = tmp_path / "script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    read, write = os.pipe()
    env = dict(os.environ, WARM_TEST=value)
    proc = subprocess.Popen(
        [python, str(script), str(write)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(write,),
        text=True,
        start_new_session=True,
        # SIGINT as a terminal leaves it: a test process may have it ignored, which a new
        # interpreter, and so the shim's child, would inherit
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    os.close(write)
    pid = None
    if stop is not None:
        end = time.monotonic() + 30
        while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
            assert time.monotonic() < end, "the script never started"
            time.sleep(0.02)
        pid = int((tmp_path / "pid").read_text())
        os.kill(proc.pid, stop)
    out, err = proc.communicate(timeout=60)
    with os.fdopen(read, "rb") as channel:
        sent = channel.read()
    pid = pid or int((tmp_path / "pid").read_text())
    (tmp_path / "pid").unlink()
    return subprocess.CompletedProcess(proc.args[1:], proc.returncode, out, err), sent, pid


@pytest.mark.fresh
@pytest.mark.parametrize("stop", [None, signal.SIGTERM, signal.SIGINT], ids=["exit", "term", "int"])
def test_the_shim_runs_and_ends_as_the_interpreter(tmp_path, stop):
    value = "exit" if stop is None else "sleep"
    real, real_sent, _ = run(sys.executable, tmp_path, value, stop)
    warm, warm_sent, _ = run(warm_capture.shim(), tmp_path, value, stop)
    assert warm.returncode == real.returncode == (3 if stop is None else -stop)
    assert (warm.stdout, warm.stderr) == (real.stdout, real.stderr)
    assert warm_sent == real_sent == b"channel"


@pytest.mark.fresh
def test_a_killed_shim_takes_its_child_with_it(tmp_path):
    result, _, pid = run(warm_capture.shim(), tmp_path, "sleep", signal.SIGKILL)
    assert result.returncode == -signal.SIGKILL
    end = time.monotonic() + 10
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(pid)


def pid_and_shim_pid(shim, tmp_path):
    """Run a script through the shim; return (its pid, the shim's)."""
    script = tmp_path / "pid.py"
    script.write_text("import os\nprint(os.getpid())\n", encoding="utf-8")
    read, write = os.pipe()
    proc = subprocess.Popen(
        [shim, str(script), str(write)], stdout=subprocess.PIPE, text=True, pass_fds=(write,)
    )
    os.close(write)
    os.close(read)
    out, _ = proc.communicate(timeout=60)
    return int(out), proc.pid


@pytest.mark.fresh
def test_other_start_up_variables_get_the_real_interpreter(tmp_path, monkeypatch):
    shim = warm_capture.shim()
    script, shim_pid = pid_and_shim_pid(shim, tmp_path)
    assert script != shim_pid  # a fork of the server ran it
    monkeypatch.setenv("TORCH_BACKTWICE_WARM_TEST", "1")
    script, shim_pid = pid_and_shim_pid(shim, tmp_path)
    assert script == shim_pid  # the shim exec'd the real interpreter
