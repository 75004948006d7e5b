"""Shared fixtures: the repo's paths, a page built once, doctored snapshots, the browser."""

import copy
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from backtwice import snapshot as snap
from backtwice.render import render_page

from . import warm, warm_capture

ROOT = Path(__file__).resolve().parent.parent
REPRO = ROOT / "repro"
SNAPSHOTS = ROOT / "snapshots"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The layers, by module: the browser tests start Chromium, these start or import torch (a
# capture, a build, a loop run in process, the diagnoser on a script); the rest, the fast
# layer, are marked `unit`.
BROWSER = {"test_browser", "test_browser_checker", "test_browser_diagnoser"}
TORCH = {
    "test_capture",
    "test_cli",
    "test_diagnose",
    "test_diagnose_page",
    "test_diagnose_robust",
    "test_diagnose_runners",
    "test_diagnose_try",
    "test_diagnose_try_classes",
    "test_faults",
    "test_loops",
    "test_reuse",
    "test_versions",
    "test_warm",
    "test_warm_capture",
}

# Modules whose tests xdist hands out one by one rather than as a whole module: each test
# starts torch in processes of its own and shares nothing costly with the others (no module
# fixture worth keeping on one worker), and together they are half the suite's time, which
# whole modules would leave on one worker while the other waits. Every other module stays on
# one worker: a module fixture runs once (test_capture's capture, test_diagnose's reports),
# and a worker starts one Chromium for the browser modules it gets.
ONE_BY_ONE = {
    "test_cli",
    "test_diagnose_page",
    "test_diagnose_robust",
    "test_diagnose_runners",
    "test_diagnose_try_classes",
    "test_faults",
    "test_reuse",
    "test_versions",
    "test_warm",
    "test_warm_capture",
}


# Tests that read one costly run made once (a fixture that runs build.py, a capture of every
# scenario), by fixture name: xdist hands each group to one worker as a unit, so the run is
# made once, not once on each worker. Every test that uses such a fixture is listed here
# (pytest_collection_modifyitems checks).
TOGETHER = {
    "checked": (
        "test_cli::test_check_prints_a_diff_and_writes_nothing",
        "test_reuse::test_check_runs_every_case_and_catches_a_tampered_record",
    ),
    "rebuilt": (
        "test_cli::test_build_then_rebuild_leaves_snapshot_untouched",
        "test_cli::test_the_page_rendered_while_torch_imports_is_used_only_when_the_capture_matches",
    ),
    "first_capture": (
        "test_versions::test_python_option_gives_the_same_snapshot",
        "test_versions::test_new_torch_capture_prints_drift_against_the_newest_other",
    ),
    "recaptured": (
        "test_reuse::test_recapture_runs_every_case_and_puts_back_a_tampered_record",
        "test_versions::test_recapture_reuses_an_env_and_matches_the_committed_snapshot",
    ),
}


def _test_name(nodeid):
    """'tests/test_cli.py::test_x[param]' -> 'test_cli::test_x'."""
    module, _, name = nodeid.partition("::")
    return f"{Path(module).stem}::{name.split('[', 1)[0]}"


GROUP = {name: fixture for fixture, names in TOGETHER.items() for name in names}


def pytest_configure(config):
    """One thread per torch process. xdist runs a worker per core, and each worker's tests
    start more processes that use torch; with OpenMP's default of a thread per core in each,
    the threads outnumber the cores and spin waiting for one another (30 short cases ran 5
    times slower with two such processes at once, 40 times with other work on the cores).
    Set before any test module imports torch, and inherited by every process a test starts.
    The capture pins one thread itself, so the snapshot's variables digest leaves this
    variable out (harness.py)."""
    os.environ["OMP_NUM_THREADS"] = "1"
    warm_capture.BASE.update(os.environ)


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile (pyproject.toml's addopts), with the tests of ONE_BY_ONE's modules each
    a unit of their own and TOGETHER's groups a unit each. Not loadgroup with xdist_group
    marks: with pytest 9.2 and xdist 3.8 they group nothing (pytest-dev/pytest-xdist#1386,
    docs/testing.md)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            group = GROUP.get(_test_name(nodeid))
            if group:
                return f"together::{group}"
            module = nodeid.split("::", 1)[0]
            return nodeid if Path(module).stem in ONE_BY_ONE else module

    return Scheduling(config, log)


def pytest_collection_modifyitems(items):
    """Mark each test with its layer; stop if a test reads a TOGETHER fixture unlisted there."""
    for item in items:
        for fixture in TOGETHER:
            listed = GROUP.get(_test_name(item.nodeid)) == fixture
            if (fixture in getattr(item, "fixturenames", ())) != listed:
                raise pytest.UsageError(
                    f"{item.nodeid}: uses the fixture {fixture!r} but is not listed under it in "
                    "tests/conftest.py's TOGETHER, or is listed but does not use it; list the "
                    "tests that use it there, so that xdist runs them on one worker"
                )
        module = item.path.stem
        if module in BROWSER:
            item.add_marker(pytest.mark.browser)
        elif module in TORCH:
            item.add_marker(pytest.mark.torch)
        else:
            item.add_marker(pytest.mark.unit)


@pytest.fixture(autouse=True)
def _fresh_or_warm(request, monkeypatch):
    """Commands through tests/warm.py run in forks of a warm interpreter, and a capture this
    process starts with sys.executable in a fork of a warm capture interpreter
    (tests/warm_capture.py), except in a test marked `fresh`, whose commands and captures start
    new interpreters (what it checks is the process)."""
    warm.FRESH = request.node.get_closest_marker("fresh") is not None
    if not warm.FRESH:
        from backtwice.child import Child

        started = Child.__init__

        def warm_init(self, python, *args, **kwargs):
            if python == sys.executable:
                python = warm_capture.python()  # sys.executable under WARM_CAPTURE=0
            started(self, python, *args, **kwargs)

        monkeypatch.setattr(Child, "__init__", warm_init)
    yield
    warm.FRESH = False


def pytest_sessionfinish(session):
    """End this process's warm interpreters."""
    warm.close()
    warm_capture.close()


def committed_path():
    """The committed snapshot a capture here is compared with: that of the installed torch (the
    capture pin), or the newest when torch is not installed."""
    try:
        path = SNAPSHOTS / snap.file_name(importlib.metadata.version("torch"))
    except importlib.metadata.PackageNotFoundError:
        path = None
    return path if path and path.exists() else snap.load_dir(SNAPSHOTS)[-1][0]


@pytest.fixture(scope="session")
def snapshot_data():
    """The committed snapshot as plain JSON data; copy before changing."""
    return json.loads(committed_path().read_text(encoding="utf-8"))


def build_from(data, folder):
    """Write snapshot data into folder/snapshots and render folder/index.html; return its text."""
    snaps = folder / "snapshots"
    snaps.mkdir(parents=True, exist_ok=True)
    path = snaps / snap.file_name(data["environment"]["torch"])
    path.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
    html = render_page(snap.load_dir(snaps), REPRO)
    (folder / "index.html").write_text(html, encoding="utf-8")
    return html


@pytest.fixture
def doctor(snapshot_data, tmp_path):
    """Build a page from a changed copy of the committed snapshot: doctor(change) -> index.html."""

    def build(change):
        data = copy.deepcopy(snapshot_data)
        change(data)
        build_from(data, tmp_path)
        return tmp_path / "index.html"

    return build


@pytest.fixture
def snapshots_copy(tmp_path, snapshot_data):
    """A folder holding a copy of the committed snapshot, and its data."""
    folder = tmp_path / "snapshots"
    folder.mkdir()
    path = folder / committed_path().name
    path.write_text(snap.dumps(snap.parse(json.dumps(snapshot_data), path)), encoding="utf-8")
    return folder, path


def doctor_file(path, snapshot_data, change):
    """Write a changed copy of the committed snapshot's data to path; return the text written."""
    data = json.loads(json.dumps(snapshot_data))
    change(data)
    text = json.dumps(data)
    path.write_text(text, encoding="utf-8")
    return text


def tamper_a_fix(data):
    """Rewrite the fix of the first diagnoser case (by name) that has one; return its name."""
    name = sorted(name for name, run in data["cases"].items() if run["report"]["fix"])[0]
    data["cases"][name]["report"]["fix"] = "Tampered with."
    return name


@dataclass(frozen=True)
class Checked:
    """`build.py --check` on a changed copy of the committed snapshot."""

    result: subprocess.CompletedProcess
    path: Path
    """The changed snapshot, in a folder of its own."""
    before: str
    """Its text before the check."""
    out: Path
    """The --out folder given."""
    line: int
    """The line c1_backward_twice raises at in the committed snapshot (5 in the copy)."""


@pytest.fixture(scope="session")
def checked(tmp_path_factory, snapshot_data):
    """`build.py --check` (every scenario and every case captured afresh) on a copy of the
    committed snapshot where c1_backward_twice raised at line 5 and one case's fix reads
    "Tampered with.": run once, for the tests in TOGETHER["checked"], each of which reads the
    part of the diff it is about."""
    from .test_cli import build

    folder = tmp_path_factory.mktemp("checked") / "snapshots"
    folder.mkdir()
    path = folder / committed_path().name

    def change(data):
        data["scenarios"]["c1_backward_twice"]["raised"]["line"] = 5
        tamper_a_fix(data)

    before = doctor_file(path, snapshot_data, change)
    out = folder.parent / "site"
    result = build("--check", "--snapshots", folder, "--out", out)
    line = snapshot_data["scenarios"]["c1_backward_twice"]["raised"]["line"]
    return Checked(result, path, before, out, line)


@pytest.fixture(scope="session")
def venv_python(tmp_path_factory):
    """Another interpreter path: a venv that sees this interpreter's torch.

    --system-site-packages alone would see the base interpreter's packages, not those of the
    virtual environment the tests run in, so the venv's site-packages is a link to this
    interpreter's. Not a .pth file naming it: packages outside the interpreter's own folders
    are the reader's installed code to the diagnoser, which then reads every RECORD (torch's
    too) in every job's fork, ten times the capture's CPU time.
    """
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib).rmdir()
    Path(purelib).symlink_to(sysconfig.get_paths()["purelib"], target_is_directory=True)
    return python


@dataclass(frozen=True)
class Recaptured:
    """`build.py --recapture` on a copy of the committed snapshot with one case's fix tampered
    with, its environment folder holding a link to `venv_python`'s venv."""

    result: subprocess.CompletedProcess
    path: Path
    """The snapshot it rewrote."""
    case: str
    """The case whose fix was tampered with."""
    envs: Path
    """The --envs folder: torch-X.Y.Z, a link to the venv, for the installed torch."""
    out: Path
    """The --out folder given."""


@pytest.fixture(scope="session")
def recaptured(tmp_path_factory, snapshot_data, venv_python):
    """--recapture (a real interpreter, every scenario and every case run afresh: 20 CPU s)
    made once for the tests in TOGETHER["recaptured"]: test_reuse reads that every case ran and
    put back the tampered record, test_versions that the environment was reused and the
    snapshot written is the committed one."""
    from .test_cli import build

    tmp_path = tmp_path_factory.mktemp("recaptured")
    here = importlib.metadata.version("torch").split("+")[0]
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / f"torch-{here}").symlink_to(venv_python.parent.parent)
    folder = tmp_path / "snapshots"
    folder.mkdir()
    path = folder / snap.file_name(here)
    data = copy.deepcopy(snapshot_data)
    case = tamper_a_fix(data)
    path.write_text(snap.dumps(snap.parse(json.dumps(data), path)), encoding="utf-8")
    out = tmp_path / "site"
    result = build("--recapture", "--envs", envs, "--snapshots", folder, "--out", out)
    return Recaptured(result, path, case, envs, out)


@pytest.fixture(scope="session")
def built_page(tmp_path_factory):
    """The page rendered once from the committed snapshots."""
    out = tmp_path_factory.mktemp("site")
    html = render_page(snap.load_dir(SNAPSHOTS), REPRO)
    (out / "index.html").write_text(html, encoding="utf-8")
    return out / "index.html"


@pytest.fixture(scope="session")
def built_html(built_page):
    """The built page's text."""
    return built_page.read_text(encoding="utf-8")


def chromium_executable():
    """Chromium from $CHROMIUM_PATH or PATH; None lets Playwright use its own browser."""
    named = os.environ.get("CHROMIUM_PATH")
    if named:
        return named
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """Launch Debian's Chromium by path with flags for a machine without a network."""
    args = {**browser_type_launch_args, "args": CHROMIUM_FLAGS}
    executable = chromium_executable()
    if executable:
        args["executable_path"] = executable
    return args


def alive(pid):
    """Whether a process runs (a zombie, ended and waiting to be reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
