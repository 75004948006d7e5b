"""build.py's command line: modes, messages and exit codes, run as a user would."""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from backtwice import capture, manifest
from backtwice import snapshot as snap
from backtwice.errors import EXIT_CAPTURE, EXIT_CHECK, EXIT_CLAIM, EXIT_INPUT, EXIT_USAGE

from . import warm_capture
from .conftest import REPRO, ROOT, SNAPSHOTS, committed_path, doctor_file

# Options after which a build starts no capture interpreter of its own choosing.
OWN_INTERPRETER = {"--python", "--recapture", "--render-only", "--help"}


def build(*args, cwd=ROOT):
    """Run build.py; return the completed process. A build that would capture with
    sys.executable gets `--python` naming the warm capture interpreter (tests/warm_capture.py),
    except in a test marked `fresh`."""
    args = [str(arg) for arg in args]
    if not OWN_INTERPRETER.intersection(args) and warm_capture.python() != sys.executable:
        args = ["--python", warm_capture.python(), *args]
    return subprocess.run(
        [sys.executable, str(ROOT / "build.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_help_lists_modes_and_exit_codes():
    result = build("--help")
    assert result.returncode == 0
    for text in (
        "--render-only",
        "--check",
        "--snapshots DIR",
        "--out DIR",
        "--python PATH",
        "--quiet",
    ):
        assert text in result.stdout
    for code in ("0  success", "3  a snapshot", "4  a scenario", "5  --check", "6  a claim"):
        assert code in result.stdout


def test_unknown_option_is_a_usage_error():
    result = build("--bogus")
    assert result.returncode == EXIT_USAGE


def test_render_only_writes_page_and_never_imports_torch(tmp_path):
    code = (
        "import sys; from backtwice.cli import main; "
        f"rc = main(['--render-only', '--out', {str(tmp_path)!r}]); "
        "print('torch' in sys.modules); sys.exit(rc)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "False"
    assert (tmp_path / "index.html").stat().st_size > 10_000
    assert result.stdout.startswith(f"wrote {tmp_path / 'index.html'} (")
    newest = snap.load_dir(SNAPSHOTS)[-1]
    assert (
        f"page leads with torch {newest[1].environment.torch} "
        f"(snapshots/{newest[0].name})\n" in result.stdout
    )


def test_render_is_deterministic(tmp_path):
    pages = []
    for name in ("a", "b"):
        result = build("--render-only", "--quiet", "--out", tmp_path / name)
        assert result.returncode == 0, result.stderr
        pages.append((tmp_path / name / "index.html").read_bytes())
    assert pages[0] == pages[1]


def test_quiet_prints_nothing(tmp_path):
    result = build("--render-only", "--quiet", "--out", tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_missing_snapshot_folder(tmp_path):
    result = build("--render-only", "--snapshots", tmp_path / "nowhere", "--out", tmp_path)
    assert result.returncode == EXIT_INPUT
    assert result.stderr == (
        f"error: {tmp_path / 'nowhere'}: no such snapshot folder; "
        "run `python build.py` with torch installed to capture it again\n"
    )


def test_corrupt_snapshot_leaves_the_old_page_untouched(tmp_path, snapshots_copy):
    folder, path = snapshots_copy
    out = tmp_path / "out"
    out.mkdir()
    (out / "index.html").write_text("the old page", encoding="utf-8")
    path.write_text('{"schema": 1,\n  "environment": ', encoding="utf-8")
    result = build("--render-only", "--snapshots", folder, "--out", out)
    assert result.returncode == EXIT_INPUT
    assert result.stderr == (
        f"error: {path}(2): is not valid JSON (Expecting value); "
        "run `python build.py` with torch installed to capture it again\n"
    )
    assert (out / "index.html").read_text(encoding="utf-8") == "the old page"
    assert [p.name for p in out.iterdir()] == ["index.html"]


def test_unknown_schema_version(tmp_path, snapshots_copy, snapshot_data):
    folder, path = snapshots_copy
    doctor_file(path, snapshot_data, lambda data: data.update(schema=99))
    result = build("--render-only", "--snapshots", folder, "--out", tmp_path)
    assert result.returncode == EXIT_INPUT
    assert result.stderr == (
        f"error: {path}: was written by a newer build of this project (schema 99; this build "
        f"reads schema {snap.SCHEMA}); update this checkout, or capture into another folder with --snapshots\n"
    )


def test_missing_field_is_named(tmp_path, snapshots_copy, snapshot_data):
    folder, path = snapshots_copy
    doctor_file(
        path,
        snapshot_data,
        lambda data: data["scenarios"]["c1_backward_twice"]["raised"].pop("message"),
    )
    result = build("--render-only", "--snapshots", folder, "--out", tmp_path)
    assert result.returncode == EXIT_INPUT
    assert result.stderr == (
        f"error: {path}: field 'scenarios.c1_backward_twice.raised.message' is missing; "
        "run `python build.py` with torch installed to capture it again\n"
    )


def test_stale_snapshot_is_detected(tmp_path, snapshots_copy, snapshot_data):
    folder, path = snapshots_copy
    doctor_file(
        path, snapshot_data, lambda data: data["sources"].update({"c2_detach.py": "0" * 64})
    )
    result = build("--render-only", "--snapshots", folder, "--out", tmp_path)
    assert result.returncode == EXIT_INPUT
    assert result.stderr == (
        f"error: {path}: field 'sources.c2_detach.py' does not match repro/c2_detach.py, which "
        "changed since the capture; run `python build.py` to capture it again\n"
    )


def test_false_claim_stops_the_build(tmp_path, snapshots_copy, snapshot_data):
    folder, path = snapshots_copy

    def change(data):
        data["scenarios"]["c2_retain_graph"]["outputs"][2]["values"][3] = 9

    doctor_file(path, snapshot_data, change)
    result = build("--render-only", "--snapshots", folder, "--out", tmp_path)
    assert result.returncode == EXIT_CLAIM
    assert result.stderr.startswith(
        f"error: {path}: section 'cause-2': the check 'retained_depth_grows_by_one' failed "
        "(depths per step are [4, 5, 9, 7], not +1 a step); the page would say "
        '"In this toy, with retain_graph=True instead, it grows every step'
    )
    assert result.stderr.endswith("rewrite that sentence in backtwice/claims.py\n")
    assert not (tmp_path / "index.html").exists()


@pytest.mark.fresh  # a real interpreter gives the committed bytes, as a maintainer's does
def test_check_passes_on_the_committed_snapshot_from_any_folder(tmp_path):
    # Scenarios run in repro/ whatever the caller's folder, so their output is the same.
    result = build("--check", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{committed_path()} matches a fresh capture" in result.stdout


def test_check_prints_a_diff_and_writes_nothing(checked):
    # `checked` (conftest.py): --check on a copy where c1_backward_twice raised at line 5.
    result, path = checked.result, checked.path
    assert result.returncode == EXIT_CHECK
    assert f'-        "line": 5,\n+        "line": {checked.line},' in result.stdout
    assert result.stderr == (
        f"error: {path}: differs from a fresh capture (diff above); "
        "run `python build.py` to update it and commit the result\n"
    )
    assert path.read_text(encoding="utf-8") == checked.before
    assert not checked.out.exists()


@dataclass(frozen=True)
class Rebuilt:
    """Three builds on one snapshot folder; see `rebuilt`."""

    path: Path
    """The snapshot."""
    first: subprocess.CompletedProcess
    """A build on a copy of the committed snapshot."""
    first_mtimes: tuple[int, int]
    """The snapshot's mtime before and after it."""
    doctored: bytes
    """The page --render-only rendered from the doctored snapshot."""
    changed: subprocess.CompletedProcess
    """The build on the doctored snapshot, which the capture differs from."""
    changed_page: bytes
    """The page it wrote."""
    rebuild: subprocess.CompletedProcess
    """The build after it, on the snapshot it wrote."""
    rebuild_mtimes: tuple[int, int]
    """The snapshot's mtime before and after it."""
    rebuild_page: bytes
    """The page it wrote."""
    again: bytes
    """The page --render-only rendered after it."""


def mtime(path):
    return path.stat().st_mtime_ns


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory, snapshot_data):
    """Builds made once for the tests in conftest.py's TOGETHER["rebuilt"], on one folder: a
    build on a copy of the committed snapshot; then, with a printed loss of c1_fixed doctored
    in that snapshot, the page --render-only renders from it, a build (its capture differs:
    it writes the snapshot and renders the page again), a rebuild (nothing differs: the page
    rendered while torch imports is written) and --render-only once more."""
    tmp_path = tmp_path_factory.mktemp("rebuilt")
    folder = tmp_path / "snapshots"
    folder.mkdir()
    path = folder / committed_path().name
    path.write_text(snap.dumps(snap.parse(json.dumps(snapshot_data), path)), encoding="utf-8")
    before = mtime(path)
    first = build("--snapshots", folder, "--out", tmp_path / "first-site")
    first_mtimes = (before, mtime(path))

    def change(data):
        printed = data["scenarios"]["c1_fixed"]["outputs"][0]
        printed["text"] = printed["text"] + "1"

    doctor_file(path, snapshot_data, change)

    def render(name):
        done = build("--render-only", "--snapshots", folder, "--out", tmp_path / name)
        assert done.returncode == 0, done.stderr
        return (tmp_path / name / "index.html").read_bytes()

    doctored = render("doctored")
    changed = build("--snapshots", folder, "--out", tmp_path / "site")
    changed_page = (tmp_path / "site" / "index.html").read_bytes()
    before = mtime(path)
    rebuild = build("--snapshots", folder, "--out", tmp_path / "site")
    rebuild_mtimes = (before, mtime(path))
    rebuild_page = (tmp_path / "site" / "index.html").read_bytes()
    return Rebuilt(
        path,
        first,
        first_mtimes,
        doctored,
        changed,
        changed_page,
        rebuild,
        rebuild_mtimes,
        rebuild_page,
        render("again"),
    )


def test_build_then_rebuild_leaves_snapshot_untouched(rebuilt):
    first, second, path = rebuilt.first, rebuilt.rebuild, rebuilt.path
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[1] == f"unchanged: {path}"
    assert rebuilt.first_mtimes[0] == rebuilt.first_mtimes[1]
    # The rebuild, after a build that wrote the snapshot (rebuilt's second build).
    assert second.returncode == 0
    assert second.stdout.splitlines()[1] == f"unchanged: {path}"
    assert rebuilt.rebuild_mtimes[0] == rebuilt.rebuild_mtimes[1]
    jobs = len(manifest.load_manifest(REPRO)) + len(
        capture.loop_jobs(manifest.load_loop_builder(REPRO), REPRO)
    )
    cases = len(manifest.load(REPRO).cases)
    assert second.stdout.splitlines()[0].startswith(
        f"ran {jobs} scenarios and loops and 0 of {cases} diagnoser cases "
        f"({cases} reused, unchanged since the capture) in "
    )


def test_the_page_rendered_while_torch_imports_is_used_only_when_the_capture_matches(rebuilt):
    # The build renders the page from the snapshots as they are while torch imports. Here the
    # capture differs (a doctored printed loss): the page is rendered again, from the fresh
    # capture. Then nothing differs: the page rendered ahead is written, the same bytes.
    first, second, page = rebuilt.changed, rebuilt.rebuild, rebuilt.changed_page
    assert first.returncode == 0, first.stderr
    assert "rendered while torch was imported" not in first.stdout
    assert page != rebuilt.doctored
    assert second.returncode == 0, second.stderr
    assert "index.html (" in second.stdout
    assert ", rendered while torch was imported\n" in second.stdout
    assert rebuilt.rebuild_page == page
    assert rebuilt.again == page


def test_hanging_scenario_writes_nothing(tmp_path, snapshots_copy):
    folder, path = snapshots_copy
    before = path.read_bytes()
    repro = tmp_path / "repro"
    repro.mkdir()
    (repro / "scenarios.toml").write_text(
        '[[scenario]]\nid = "hangs"\nexpect = "runs"\ntimeout = 1\n'
    )
    (repro / "hangs.py").write_text("import time\ntime.sleep(60)\n")
    result = build("--repro", repro, "--snapshots", folder, "--out", tmp_path / "site")
    assert result.returncode == EXIT_CAPTURE
    assert result.stderr == (
        f"error: {repro / 'hangs.py'}: scenario 'hangs' did not finish within 1 s; "
        "make it finish or raise its timeout; nothing was written\n"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == [path.name]
    assert not (tmp_path / "site").exists()


def test_committed_snapshot_matches_repro():
    """The committed snapshot was captured from the repro/ sources on disk."""
    from backtwice import manifest

    (path, data), *_ = reversed(snap.load_dir(SNAPSHOTS))
    assert data.sources == manifest.load(REPRO).hashes(), path
