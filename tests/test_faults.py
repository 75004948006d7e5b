"""Bad input and faults: one line `file(line): message`, its exit code, and nothing damaged.

Each case runs build.py as a user would and checks the exit code, that stderr is exactly one
line with no traceback, and that the snapshot and the page are byte-identical afterwards.
"""

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from backtwice import capture as capture_module
from backtwice import manifest
from backtwice import snapshot as snap
from backtwice.errors import (
    EXIT_CAPTURE,
    EXIT_CLAIM,
    EXIT_HUNG_UP,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT,
    EXIT_TERMINATED,
    InputError,
    OutputError,
)

from . import warm_capture
from .conftest import REPRO, ROOT, alive, committed_path, doctor_file
from .test_cli import build

OLD_PAGE = "the old page\n"
PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture
def site(tmp_path):
    """An output folder holding a previous page."""
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text(OLD_PAGE, encoding="utf-8")
    return out


@pytest.fixture
def repro_copy(tmp_path):
    """A copy of repro/ to change, with the diagnoser's cases beside it as in the project."""
    folder = tmp_path / "repro"
    shutil.copytree(REPRO, folder, ignore=shutil.ignore_patterns("__pycache__"))
    cases = tmp_path / manifest.CASES
    shutil.copytree(ROOT / manifest.CASES, cases, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


@pytest.fixture(autouse=True, scope="module")
def subreaper():
    """Make this test process a child subreaper while these tests run: whatever a build leaves
    running, detached or not, becomes our child, where survivors() finds it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.fixture(autouse=True)
def stop_signals_delivered():
    """Ctrl-C, SIGTERM and SIGHUP reach this process and the builds it starts as they reach a
    shell's foreground job: Python's own SIGINT handler, none of the three blocked (a build
    inherits the mask and an ignored SIGINT). In full runs, Ctrl-C tests sometimes found the
    signal neither raised nor acted on, on a worker where other tests had run first; no test
    changes Python's handler (checked after every test), so something set it from C or blocked
    it, which this undoes without finding what."""
    stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, stops)
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    signal.signal(signal.SIGINT, handler)


EARLIER = set()  # this process's children before the test began (a browser other tests use)


@pytest.fixture(autouse=True)
def earlier_children():
    """Note the children this process had before the test, which are not the build's."""
    EARLIER.clear()
    EARLIER.update(_children())


def _children():
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="utf-8") as handle:
                    stat = handle.read()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == os.getpid():
                found.append(int(name))
    return found


def survivors(within=5.0):
    """The processes a finished build left running (they come to this process, a subreaper)."""
    end = time.monotonic() + within
    while True:
        left = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", encoding="utf-8") as handle:
                    stat = handle.read()
            except OSError:
                continue
            state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
            if int(parent) != os.getpid() or int(name) in EARLIER | warm_capture.servers():
                continue
            if state == "Z":  # ended; reap it, as init would
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(int(name), os.WNOHANG)
            else:
                left.append(int(name))
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.05)


def one_line(result, code):
    """Assert the exit code, a single `error: ...` line on stderr and no process left running;
    return the line."""
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert survivors() == [], "the build left processes running"
    return lines[0]


def unchanged(folder, path, before, site):
    """The snapshot folder holds just the old snapshot, byte for byte, and the page is as it was."""
    assert path.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == [path.name]
    assert (site / "index.html").read_text(encoding="utf-8") == OLD_PAGE
    assert [p.name for p in site.iterdir()] == ["index.html"]


# All or nothing ----------------------------------------------------------------------------


def test_a_claim_broken_by_the_capture_writes_nothing_and_names_the_change(
    repro_copy, snapshots_copy, site
):
    folder, path = snapshots_copy
    before = path.read_bytes()
    # Without the diagnoser's cases, which a changed repro/ file would all run again: the claim
    # is of a scenario, and the build stops on it the same way.
    shutil.rmtree(repro_copy.parent / manifest.CASES)
    scenario = repro_copy / "c1_backward_twice.py"
    lines = scenario.read_text(encoding="utf-8").splitlines()
    calls = [i for i, line in enumerate(lines) if line.strip() == "loss.backward()"]
    raising = calls[1]  # the second call is the one torch raises at
    indent = lines[raising][: len(lines[raising]) - len(lines[raising].lstrip())]
    lines[raising] = indent + 'raise ValueError("not the error")'
    scenario.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = build("--repro", repro_copy, "--snapshots", folder, "--out", site)
    line = one_line(result, EXIT_CLAIM)
    assert line.startswith(
        "error: repro/c1_backward_twice.py: scenario c1_backward_twice changed since "
        f"{path.name} (raised RuntimeError at line {raising + 1} -> ValueError at line {raising + 1}"
    ), line
    assert line.index("changed since") < line.index("the page would say")
    assert line.endswith(
        "fix repro/c1_backward_twice.py, or if torch really behaves so now, rewrite that "
        "sentence in backtwice/claims.py"
    )
    unchanged(folder, path, before, site)


def test_out_naming_a_file_writes_nothing(tmp_path, snapshots_copy):
    folder, path = snapshots_copy
    before = path.read_bytes()
    target = tmp_path / "a-file"
    target.write_text("keep me", encoding="utf-8")
    result = build("--snapshots", folder, "--out", target)
    assert one_line(result, EXIT_OUTPUT) == (
        f"error: {target}: is a file, not a folder; give --out a folder for index.html"
    )
    assert target.read_text(encoding="utf-8") == "keep me"
    assert path.read_bytes() == before


def test_out_that_cannot_be_created_writes_nothing(snapshots_copy):
    folder, path = snapshots_copy
    before = path.read_bytes()
    result = build("--render-only", "--snapshots", folder, "--out", "/sys/backtwice-test")
    line = one_line(result, EXIT_OUTPUT)
    assert line == (
        "error: /sys/backtwice-test/index.html: cannot be written (Operation not permitted); "
        "nothing was changed"
    )
    assert path.read_bytes() == before


@pytest.mark.parametrize("option", ["--snapshots", "--out"])
def test_a_folder_that_cannot_be_written_stops_the_build_before_the_capture(
    snapshots_copy, site, option
):
    # Found before the capture, not after its minutes of work: nothing ran, nothing changed.
    folder, path = snapshots_copy
    before = path.read_bytes()
    folders = {"--snapshots": folder, "--out": site, option: "/sys/backtwice-test"}
    result = build("--snapshots", folders["--snapshots"], "--out", folders["--out"])
    assert one_line(result, EXIT_OUTPUT) == (
        "error: /sys/backtwice-test: cannot be written (Operation not permitted); give "
        f"{option} a folder you can write; nothing was captured"
    )
    assert "ran " not in result.stdout
    assert path.read_bytes() == before
    assert (site / "index.html").read_text(encoding="utf-8") == OLD_PAGE


def test_a_failed_rename_puts_back_what_was_renamed(tmp_path, monkeypatch):
    first, second = tmp_path / "a.json", tmp_path / "b.html"
    first.write_text("old a", encoding="utf-8")
    real_replace = os.replace

    def replace(src, dst):
        if str(dst) == str(second):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(snap.os, "replace", replace)
    with pytest.raises(OutputError) as caught:
        snap.write_all([(first, "new a"), (second, "new b")])
    assert str(caught.value).endswith(
        "b.html: cannot be written (No space left on device); nothing was changed"
    )
    assert first.read_text(encoding="utf-8") == "old a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


# Snapshots that disagree with repro/ -------------------------------------------------------


def _first_loop(data):
    return sorted(data["loops"])[0]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["scenarios"].update(extra=d["scenarios"]["c1_backward_twice"]),
            "field 'scenarios.extra' is not in repro/scenarios.toml",
        ),
        (
            lambda d: d["loops"].update({"9zzz": d["loops"][_first_loop(d)]}),
            "field 'loops.9zzz' is not in repro/loop.py's all_answers()",
        ),
        (
            lambda d: d["loops"].pop(_first_loop(d)),
            "is missing; repro/loop.py's all_answers() declares it",
        ),
        (
            lambda d: d["scenarios"]["c1_backward_twice"].update(expect="runs"),
            "field 'scenarios.c1_backward_twice.expect' is 'runs' but repro/scenarios.toml says 'raises'",
        ),
    ],
    ids=["extra-scenario", "extra-loop", "missing-loop", "expect"],
)
def test_a_snapshot_that_disagrees_with_repro_is_refused(
    tmp_path, snapshots_copy, snapshot_data, site, change, message
):
    folder, path = snapshots_copy
    doctor_file(path, snapshot_data, change)
    before = path.read_bytes()
    line = one_line(build("--render-only", "--snapshots", folder, "--out", site), EXIT_INPUT)
    assert line.startswith(f"error: {path}: field '")
    assert message in line
    assert line.endswith("run `python build.py` to capture it again")
    unchanged(folder, path, before, site)


def test_a_file_named_for_another_torch_is_refused(tmp_path, snapshot_data, site):
    folder = tmp_path / "snapshots"
    folder.mkdir()
    path = folder / "torch-2.12.0.json"
    doctor_file(path, snapshot_data, lambda d: d["environment"].update(torch="2.99.0"))
    line = one_line(build("--render-only", "--snapshots", folder, "--out", site), EXIT_INPUT)
    assert line == (
        f"error: {path}: field 'environment.torch' is '2.99.0', but the file name says "
        "otherwise; name it torch-2.99.0.json or run `python build.py` with torch installed "
        "to capture it again"
    )


def test_the_manifest_is_part_of_the_stale_check(repro_copy, snapshots_copy, site):
    folder, path = snapshots_copy
    before = path.read_bytes()
    toml = repro_copy / "scenarios.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace('expect = "raises"', 'expect = "runs"', 1),
        encoding="utf-8",
    )
    result = build("--render-only", "--repro", repro_copy, "--snapshots", folder, "--out", site)
    assert one_line(result, EXIT_INPUT) == (
        f"error: {path}: field 'sources.scenarios.toml' does not match repro/scenarios.toml, "
        "which changed since the capture; run `python build.py` to capture it again"
    )
    unchanged(folder, path, before, site)


def test_the_hash_is_of_the_text_that_ran(tmp_path):
    folder = tmp_path / "repro"
    folder.mkdir()
    (folder / "scenarios.toml").write_text('[[scenario]]\nid = "one"\nexpect = "runs"\n')
    (folder / "one.py").write_text('print("first", 1)\n', encoding="utf-8")
    repro = manifest.load(folder)
    assert repro.hashes()["one.py"] == manifest.sha256('print("first", 1)\n')
    (folder / "one.py").write_text('print("second", 2)\n', encoding="utf-8")  # edited mid-capture
    with pytest.raises(InputError) as caught:
        capture_module.capture(repro, say=lambda message: None, today="2026-01-01")
    assert str(caught.value).startswith(f"{folder / 'one.py'}: changed while the scenarios ran")


# The manifest ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            'id = "a"\nexpect = "runs"\ntimeout = "30"\n',
            "scenarios.toml(2): scenario 'a': field 'timeout' is '30'; it must be a number",
        ),
        (
            'id = "a"\nexpect = "runs"\ntimeout = -1\n',
            "scenarios.toml(2): scenario 'a': field 'timeout' is -1; give seconds above 0 and at most 600",
        ),
        (
            'id = "../build"\nexpect = "runs"\n',
            "scenarios.toml(2): scenario '../build': field 'id' must be a plain file name "
            "(letters, digits, _ and -), naming repro/<id>.py; rename it",
        ),
        (
            'id = "a"\nexpect = "runs"\ntimout = 3\n',
            "scenarios.toml(2): scenario 'a': unknown field 'timout'; the fields are id, title, "
            "expect and timeout",
        ),
        (
            'id = 7\nexpect = "runs"\n',
            "scenarios.toml: scenario number 1: field 'id' is 7; it must be a string",
        ),
    ],
    ids=["timeout-string", "timeout-negative", "id-path", "unknown-field", "id-number"],
)
def test_manifest_errors_are_one_line(tmp_path, entry, message):
    folder = tmp_path / "repro"
    folder.mkdir()
    (folder / "scenarios.toml").write_text("[[scenario]]\n" + entry, encoding="utf-8")
    (folder / "a.py").write_text("print(1)\n", encoding="utf-8")
    result = build("--repro", folder, "--snapshots", tmp_path / "snaps", "--out", tmp_path / "out")
    line = one_line(result, EXIT_INPUT)
    assert line == f"error: {folder / message}", line
    assert not (tmp_path / "snaps").exists() and not (tmp_path / "out").exists()


def test_manifest_that_is_not_utf8(tmp_path):
    folder = tmp_path / "repro"
    folder.mkdir()
    (folder / "scenarios.toml").write_bytes(b'[[scenario]]\nid = "caf\xe9"\n')
    with pytest.raises(InputError) as caught:
        manifest.load(folder)
    assert str(caught.value).endswith(
        "scenarios.toml: is not UTF-8 text (byte 22); save it as UTF-8"
    )


# What a scenario may print -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("for i in range(10**6):\n    print('line', i)\n", "more than 65536 bytes in "),
        ("import torch\nprint(torch.zeros(2048, 2048))\n", "a tensor of 4194304 elements"),
    ],
    ids=["many-prints", "big-tensor"],
)
def test_a_scenario_that_prints_too_much_is_stopped(tmp_path, snapshots_copy, site, source, what):
    folder, path = snapshots_copy
    before = path.read_bytes()
    repro = tmp_path / "repro"
    repro.mkdir()
    (repro / "scenarios.toml").write_text('[[scenario]]\nid = "loud"\nexpect = "runs"\n')
    (repro / "loud.py").write_text(source, encoding="utf-8")
    started = time.monotonic()
    result = build("--repro", repro, "--snapshots", folder, "--out", site)
    line = one_line(result, EXIT_CAPTURE)
    assert line.startswith(f"error: {repro / 'loud.py'}: scenario 'loud' printed too much: {what}")
    assert line.endswith("the page shows every printed line, so print less; nothing was written")
    assert time.monotonic() - started < 60
    unchanged(folder, path, before, site)


# Signals -----------------------------------------------------------------------------------


HANGS = """\
import os, subprocess, threading, time
detached = subprocess.Popen(["sleep", "300"], start_new_session=True)
forked = os.fork()
if forked == 0:  # a daemon made by hand: it holds every file the scenario had open
    os.setsid()
    time.sleep(300)
    os._exit(0)
threaded = []  # a process started from another thread is that thread's child
worker = threading.Thread(target=lambda: threaded.append(subprocess.Popen(["sleep", "300"])))
worker.start()
worker.join()
with open({pidfile!r}, "w") as handle:
    handle.write(f"{{os.getpid()}} {{os.getppid()}} {{detached.pid}} {{forked}} {{threaded[0].pid}}")
time.sleep({sleep})
"""


# A scenario that names no optimizer runs in a fork made before the warm-up, one that names
# one after it: each fault is checked on both paths.
LATE = "# torch.optim, named: this scenario runs after the warm-up\n"
EITHER_PATH = pytest.mark.parametrize("late", ["", LATE], ids=["early", "after-warm-up"])


def start_build(repro, folder, site, sleep=120, pidfile=None, late=""):
    """Start build.py on a one-scenario repro/ that starts two detached processes; return
    (the build's Popen, the pid file the scenario writes)."""
    pidfile = pidfile or repro.parent / "pids"
    repro.mkdir()
    (repro / "scenarios.toml").write_text('[[scenario]]\nid = "hangs"\nexpect = "runs"\n')
    (repro / "hangs.py").write_text(
        HANGS.format(pidfile=str(pidfile), sleep=sleep) + late, encoding="utf-8"
    )
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "build.py"), "--repro", repro, "--snapshots", folder]
        + ["--out", site],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, pidfile


def read_pids(pidfile, deadline=120):
    """Wait for the scenario's pid file: (scenario, the fork that started it, setsid child,
    fork, a thread's child)."""
    end = time.monotonic() + deadline
    while not (pidfile.exists() and len(pidfile.read_text().split()) == 5):
        assert time.monotonic() < end, "the scenario never started"
        time.sleep(0.05)
    return [int(pid) for pid in pidfile.read_text().split()]


def none_survive(pids, within=10.0):
    """Assert every process is gone within a few seconds."""
    end = time.monotonic() + within
    while any(alive(pid) for pid in pids) and time.monotonic() < end:
        time.sleep(0.05)
    assert not [pid for pid in pids if alive(pid)], "processes outlived the build"


# Each stop signal, its exit code and the word its one line uses.
STOP_SIGNALS = pytest.mark.parametrize(
    ("signum", "code", "how"),
    [
        (signal.SIGINT, EXIT_INTERRUPTED, "interrupted"),
        (signal.SIGTERM, EXIT_TERMINATED, "terminated"),
        (signal.SIGHUP, EXIT_HUNG_UP, "hung up"),
    ],
    ids=["ctrl-c", "sigterm", "sighup"],
)


@EITHER_PATH
@STOP_SIGNALS
def test_a_signal_stops_the_child_and_all_it_started_and_writes_nothing(
    tmp_path, snapshots_copy, site, signum, code, how, late
):
    folder, path = snapshots_copy
    before = path.read_bytes()
    proc, pidfile = start_build(tmp_path / "repro", folder, site, late=late)
    pids = read_pids(pidfile)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert one_line(result, code) == (
        f"error: {how}; the capture was stopped and nothing was written"
    )
    none_survive(pids)
    unchanged(folder, path, before, site)


@EITHER_PATH
def test_a_killed_build_takes_the_capture_and_all_it_started_with_it(
    tmp_path, snapshots_copy, site, late
):
    folder, path = snapshots_copy
    before = path.read_bytes()
    proc, pidfile = start_build(tmp_path / "repro", folder, site, late=late)
    pids = read_pids(pidfile)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    none_survive(pids)
    assert survivors() == []
    unchanged(folder, path, before, site)


@pytest.mark.fresh  # the processes a real capture interpreter leaves, or not
@EITHER_PATH
def test_detached_processes_end_with_their_scenario_and_the_capture_finishes(tmp_path, late):
    repro = tmp_path / "repro"
    repro.mkdir()
    pidfile = tmp_path / "pids"
    (repro / "scenarios.toml").write_text(
        '[[scenario]]\nid = "hangs"\nexpect = "runs"\n\n[[scenario]]\nid = "after"\nexpect = "runs"\n'
    )
    hangs = HANGS.format(pidfile=str(pidfile), sleep=0) + late
    (repro / "hangs.py").write_text(hangs, encoding="utf-8")
    (repro / "after.py").write_text("print('after')\n" + late, encoding="utf-8")
    started = time.monotonic()
    said = []
    result = capture_module.capture(repro, say=said.append)
    assert time.monotonic() - started < 60
    assert said[0].startswith("ran 2 scenarios and loops in ")
    assert result.scenarios["after"].outputs[0].text == "after"
    none_survive(read_pids(pidfile)[2:], within=1)  # gone when the scenario ended
    assert survivors(within=1) == []


# Snapshots a recapture would replace -------------------------------------------------------


def test_a_newer_schema_is_never_overwritten(tmp_path, snapshots_copy, snapshot_data, site):
    folder, path = snapshots_copy
    doctor_file(path, snapshot_data, lambda d: d.update(schema=999))
    before = path.read_bytes()
    # The build stops on the file once its capture is done, whatever it captured: one scenario.
    repro = one_scenario(tmp_path, "print('plain', 1)\n")
    line = one_line(build("--repro", repro, "--snapshots", folder, "--out", site), EXIT_INPUT)
    assert line == (
        f"error: {path}: was written by a newer build of this project (schema 999; this build "
        f"reads schema {snap.SCHEMA}); update this checkout, or capture into another folder "
        "with --snapshots"
    )
    unchanged(folder, path, before, site)


def test_a_repro_without_the_scenario_the_page_leads_with_is_one_sentence(tmp_path, site):
    # It was a traceback (facts.Missing, uncaught) once the capture was done.
    repro = one_scenario(tmp_path, "print('plain', 1)\n")
    folder = tmp_path / "snapshots"
    line = one_line(build("--repro", repro, "--snapshots", folder, "--out", site), EXIT_CLAIM)
    assert line == (
        f"error: {repro / 'scenarios.toml'}: declares no scenario 'c1_backward_twice', whose "
        "error the page leads with; declare it again (as the project's repro/scenarios.toml does)"
    )
    assert not folder.exists() or not any(folder.iterdir())
    assert (site / "index.html").read_text(encoding="utf-8") == OLD_PAGE


def test_a_corrupt_snapshot_is_replaced_with_a_notice(snapshots_copy, site):
    folder, path = snapshots_copy
    path.write_text("{not json", encoding="utf-8")
    result = build("--snapshots", folder, "--out", site)
    assert result.returncode == 0, result.stderr
    notice = [line for line in result.stdout.splitlines() if line.startswith("notice: ")]
    assert notice == [
        f"notice: {path}(1): is not valid JSON (Expecting property name enclosed in double "
        "quotes); run `python build.py` with torch installed to capture it again; replacing it "
        "with the fresh capture"
    ]
    assert snap.load(path).comparable() == snap.load(committed_path()).comparable()
    assert json.loads(path.read_text(encoding="utf-8"))["schema"] == snap.SCHEMA


def test_snapshots_naming_a_file(tmp_path, site):
    target = tmp_path / "a-file"
    target.write_text("keep me", encoding="utf-8")
    result = build("--render-only", "--snapshots", target, "--out", site)
    assert one_line(result, EXIT_INPUT) == (
        f"error: {target}: is a file, not a folder; give --snapshots a folder"
    )
    assert target.read_text(encoding="utf-8") == "keep me"
    assert (site / "index.html").read_text(encoding="utf-8") == OLD_PAGE


def test_the_drift_report_names_files_captured_from_other_text(snapshot_data):
    from backtwice import drift

    old = snap.parse(json.dumps(snapshot_data), "old.json")
    data = json.loads(json.dumps(snapshot_data))
    data["sources"]["c2_detach.py"] = "0" * 64
    new = snap.parse(json.dumps(data), "new.json")
    lines = drift.report(old, new, "old.json", "new.json").splitlines()
    assert lines[1:] == [
        "  no scenario or loop changed",
        "  files captured from other text than before: c2_detach.py",
    ]


# What a scenario prints or does to the capture -------------------------------------------


def one_scenario(tmp_path, source, ident="one", expect="runs"):
    """A repro/ folder with one scenario."""
    repro = tmp_path / "repro"
    repro.mkdir(exist_ok=True)
    (repro / "scenarios.toml").write_text(f'[[scenario]]\nid = "{ident}"\nexpect = "{expect}"\n')
    (repro / f"{ident}.py").write_text(source, encoding="utf-8")
    return repro


@pytest.mark.parametrize(
    ("source", "code", "message"),
    [
        (
            "print('caf\\udce9')\n",
            EXIT_CAPTURE,
            "scenario 'one' printed or raised text holding \\udce9, a lone surrogate",
        ),
        (
            "import os\nos.write(2, b'last words \\xff\\xfe\\n')\nos._exit(3)\n",
            EXIT_CAPTURE,
            "scenario 'one' crashed the capture interpreter: it exited with code 3 "
            "(last words \\xff\\xfe); nothing was written",
        ),
        (
            "with open(__file__, 'a', encoding='utf-8') as me:\n    me.write('# edited\\n')\n",
            EXIT_INPUT,
            "one.py: changed while the scenarios ran, so the capture is of text that is no "
            "longer there; run the build again once nothing writes into repro/; nothing was written",
        ),
    ],
    ids=["lone-surrogate", "bytes-then-crash", "edits-repro"],
)
def test_a_scenario_fault_is_one_line_and_writes_nothing(
    tmp_path, snapshots_copy, site, source, code, message
):
    folder, path = snapshots_copy
    before = path.read_bytes()
    repro = one_scenario(tmp_path, source)
    line = one_line(build("--repro", repro, "--snapshots", folder, "--out", site), code)
    assert line.startswith(f"error: {repro / 'one.py'}: "), line
    assert message in line, line
    unchanged(folder, path, before, site)


def test_a_crash_quotes_the_crashing_scenarios_own_last_line(tmp_path):
    repro = tmp_path / "repro"
    repro.mkdir()
    (repro / "scenarios.toml").write_text(
        '[[scenario]]\nid = "talks"\nexpect = "runs"\n\n[[scenario]]\nid = "dies"\nexpect = "runs"\n'
    )
    (repro / "talks.py").write_text("import sys\nprint('unrelated', file=sys.stderr)\n")
    (repro / "dies.py").write_text("import os\nos._exit(9)\n")
    with pytest.raises(capture_module.CaptureError) as caught:
        capture_module.capture(repro, say=lambda message: None)
    assert str(caught.value) == (
        f"{repro / 'dies.py'}: scenario 'dies' crashed the capture interpreter: it exited with "
        "code 9; nothing was written"
    )


def test_python_naming_a_program_that_is_not_python(tmp_path, snapshots_copy, site):
    folder, path = snapshots_copy
    before = path.read_bytes()
    result = build("--python", "/bin/cat", "--snapshots", folder, "--out", site)
    line = one_line(result, EXIT_CAPTURE)
    assert line.startswith("error: /bin/cat: exited with code 1 before it could run a scenario")
    assert line.endswith("check that it runs; nothing was written")
    unchanged(folder, path, before, site)


def test_python_naming_a_wrapper_that_prints_a_banner_captures(tmp_path):
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "Welcome to the cluster"\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    repro = one_scenario(tmp_path, "print('plain', 1)\n")
    result = capture_module.capture(repro, python=str(wrapper), say=lambda message: None)
    assert [o.text for o in result.scenarios["one"].outputs] == ["plain 1"]
    assert survivors() == []


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["recapture", "dry-run"])
def test_envs_naming_a_file(tmp_path, snapshots_copy, site, dry_run):
    folder, path = snapshots_copy
    before = path.read_bytes()
    target = tmp_path / "a-file"
    target.write_text("keep me", encoding="utf-8")
    args = ["--recapture", "--envs", target, *dry_run, "--snapshots", folder, "--out", site]
    result = build(*args)
    assert one_line(result, EXIT_INPUT) == (
        f"error: {target}: is a file, not a folder; give --envs a folder for the capture "
        "environments; nothing was written"
    )
    assert result.stdout == ""  # no plan to create anything inside a file
    assert target.read_text(encoding="utf-8") == "keep me"
    unchanged(folder, path, before, site)


def test_a_bare_venv_in_envs_is_installed_into(tmp_path, snapshots_copy, site):
    from backtwice import recapture

    folder, _ = snapshots_copy
    version = recapture.pinned_torch(ROOT / "pyproject.toml")
    venv = tmp_path / "envs" / f"torch-{version}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    result = build("--recapture", "--envs", tmp_path / "envs", "--dry-run", "--snapshots", folder)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    pins = " ".join(recapture.requirements(version))
    assert f"  torch {version}: pip install {pins} into {venv}\n" in result.stdout


def test_stdout_closed_early_is_one_notice_and_the_build_goes_on(tmp_path, snapshots_copy):
    folder, path = snapshots_copy
    out = tmp_path / "site"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "build.py"), "--render-only"]
        + ["--snapshots", str(folder), "--out", str(out)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # as `| head -1` does once it has its line
    with proc.stderr:
        stderr = proc.stderr.read()
    proc.wait(timeout=60)
    assert proc.returncode == 0, stderr
    assert stderr == (
        "notice: stdout was closed before the build finished (broken pipe); the build went on "
        "to the end without printing\n"
    )
    assert (out / "index.html").stat().st_size > 10_000
    assert survivors() == []


# The page shows what was declared and printed ---------------------------------------------


def test_a_declared_scenario_the_template_does_not_place_stops_the_build(
    repro_copy, snapshots_copy, snapshot_data, site
):
    folder, path = snapshots_copy
    (repro_copy / "extra.py").write_text("print('extra')\n", encoding="utf-8")
    toml = repro_copy / "scenarios.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8") + '\n[[scenario]]\nid = "extra"\nexpect = "runs"\n',
        encoding="utf-8",
    )
    hashes = manifest.load(repro_copy).hashes()

    def add_extra(data):
        data["sources"] = hashes
        data["scenarios"]["extra"] = {
            **data["scenarios"]["c1_fixed"],
            "outputs": [{"line": 1, "text": "extra", "values": ["extra"]}],
        }

    doctor_file(path, snapshot_data, add_extra)
    before = path.read_bytes()
    result = build("--render-only", "--repro", repro_copy, "--snapshots", folder, "--out", site)
    line = one_line(result, EXIT_CLAIM)
    assert line.startswith(
        f'error: {ROOT / "templates" / "page.html.j2"}: places no element with id="s-extra" '
        "for scenario 'extra' of repro/scenarios.toml"
    ) or line.startswith(
        'error: templates/page.html.j2: places no element with id="s-extra" '
        "for scenario 'extra' of repro/scenarios.toml"
    ), line
    assert line.endswith(
        "add {{ scenario(s.extra) }} to templates/page.html.j2 where it belongs; nothing was written"
    )
    unchanged(folder, path, before, site)


def test_every_printed_line_must_reach_the_page(snapshot_data):
    from backtwice.errors import PageError
    from backtwice.publish import check_page

    repro = manifest.load(REPRO)
    snapshot = snap.parse(json.dumps(snapshot_data), "torch.json")
    scenario = next(s for s in repro.scenarios if snapshot.scenarios[s.id].outputs)
    anchors = "".join(f'<figure id="s-{s.id}"></figure>' for s in repro.scenarios)
    with pytest.raises(PageError) as caught:
        check_page({"index.html": anchors}, [(ROOT / "torch.json", snapshot)], repro)
    first = snapshot.scenarios[scenario.id].outputs[0]
    assert f"does not show the line {first.text.splitlines()[0]!r} that scenario " in str(
        caught.value
    )
    from backtwice.render import escape_text  # as the page writes text nodes

    shown = "".join(
        f"<pre>{escape_text(o.text)}</pre>"
        for run in snapshot.scenarios.values()
        for o in run.outputs
    )
    check_page({"index.html": anchors + shown}, [(ROOT / "torch.json", snapshot)], repro)


def test_control_characters_are_shown_not_sent_raw(snapshots_copy, snapshot_data, site):
    folder, path = snapshots_copy
    text = "bell\x07 esc\x1b[31mred nul\x00 del\x7f csi\x9b cr\rend"

    def print_controls(data):
        data["scenarios"]["c1_fixed"]["outputs"].append({"line": 1, "text": text, "values": []})

    written = doctor_file(path, snapshot_data, print_controls)
    result = build("--render-only", "--snapshots", folder, "--out", site)
    assert result.returncode == 0, result.stderr
    html = (site / "index.html").read_text(encoding="utf-8")
    assert "bell\u2407 esc\u241b[31mred nul\u2400 del\u2421 csi\\x9b cr\u240dend" in html
    controls = [ch for ch in html if (ord(ch) < 32 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0]
    assert controls == []
    assert path.read_text(encoding="utf-8") == written  # the snapshot keeps the exact text


# Files a killed build left -------------------------------------------------------------------


def test_a_build_killed_between_its_renames_is_repaired_by_the_next(snapshots_copy, site):
    folder, path = snapshots_copy
    before = path.read_bytes()
    # The state SIGKILL leaves between the two renames: the snapshot in place, the page not,
    # and its staged text in a temporary file beside it.
    (site / ".index.html.a1b2c3d4").write_text("<html>new page</html>", encoding="utf-8")
    (folder / f".{path.name}.k_9zz0ab").write_text("{}", encoding="utf-8")
    result = build("--render-only", "--snapshots", folder, "--out", site)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    notices = [line for line in result.stdout.splitlines() if line.startswith("notice: ")]
    assert sorted(notices) == [
        f"notice: removed {leftover}, left by a build stopped while writing; this build writes "
        "the page again from the snapshots"
        for leftover in sorted([folder / f".{path.name}.k_9zz0ab", site / ".index.html.a1b2c3d4"])
    ]
    assert sorted(p.name for p in site.iterdir()) == [
        "diagnose.py",
        "frameworks.html",
        "index.html",
    ]
    assert sorted(p.name for p in folder.iterdir()) == [path.name]
    assert path.read_bytes() == before
    from backtwice.publish import visible
    from backtwice.render import render_page

    page = (site / "index.html").read_text(encoding="utf-8")
    assert page == visible(render_page(snap.load_dir(folder), REPRO))


def test_a_symlinked_snapshot_is_written_through_its_link(tmp_path):
    target = tmp_path / "elsewhere" / "torch-2.13.0.json"
    target.parent.mkdir()
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "snapshots" / "torch-2.13.0.json"
    link.parent.mkdir()
    link.symlink_to(target)
    snap.write_all([(link, "new")])
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text(encoding="utf-8") == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


# Newcomers -------------------------------------------------------------------------------


def test_loading_snapshots_resolves_type_hints_once_per_class(monkeypatch):
    import typing

    calls = []
    real = typing.get_type_hints
    monkeypatch.setattr(typing, "get_type_hints", lambda kind: calls.append(kind) or real(kind))
    snap._shape.cache_clear()
    loaded = snap.load_dir(ROOT / "snapshots")
    assert len(loaded) >= 1
    assert len(calls) == len(set(calls)) <= 15


def test_gitignore_covers_the_readmes_venv():
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert ".venv/" in lines
    assert "python3 -m venv .venv" in (ROOT / "README.md").read_text(encoding="utf-8")


@STOP_SIGNALS
def test_a_signal_while_writing_waits_for_the_files_and_says_so(
    snapshots_copy, site, monkeypatch, capsys, signum, code, how
):
    from backtwice import cli

    folder, path = snapshots_copy
    real = snap.write_all

    def signalled_mid_write(files):
        os.kill(os.getpid(), signum)  # arrives while the files are written
        time.sleep(0.05)
        real(files)

    monkeypatch.setattr(snap, "write_all", signalled_mid_write)
    assert cli.main(["--render-only", "--snapshots", str(folder), "--out", str(site)]) == code
    err = capsys.readouterr().err
    assert err == (
        f"error: {how} while the build wrote its files; it finished writing them first, so "
        "the snapshot and the page are complete\n"
    )
    assert (site / "index.html").read_text(encoding="utf-8").startswith("<!doctype html>")
    assert sorted(p.name for p in site.iterdir()) == [
        "diagnose.py",
        "frameworks.html",
        "index.html",
    ]
