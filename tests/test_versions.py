"""Several torch versions: --python, the version matrix, word diffs and the drift report."""

import copy
import json
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

from backtwice import drift
from backtwice import snapshot as snap
from backtwice.errors import EXIT_CAPTURE, EXIT_INPUT
from backtwice.manifest import load_manifest
from backtwice.render import render_page

from .conftest import REPRO
from .test_cli import build

OLD_WORDING = (
    "Trying to backward through the graph a second time (or directly access saved variables after "
    "they have already been freed)."
)


def older(data):
    """A synthetic older snapshot: one message and one figure differ from the committed one."""
    old = copy.deepcopy(data)
    old["environment"]["torch"] = "2.9.1"
    old["scenarios"]["grad_twice"]["raised"]["message"] = OLD_WORDING
    old["scenarios"]["c3_summed"]["outputs"][0]["text"] = (
        "x.grad: tensor([ 17.5000, 116.5854, 826.9431])"
    )
    return old


@pytest.fixture
def two_versions(tmp_path, snapshot_data):
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for data in (older(snapshot_data), snapshot_data):
        (folder / snap.file_name(data["environment"]["torch"])).write_text(
            json.dumps(data), encoding="utf-8"
        )
    return folder


def test_drift_report_names_exactly_the_differences(snapshot_data):
    old = snap.parse(json.dumps(older(snapshot_data)), "old")
    new = snap.parse(json.dumps(snapshot_data), "new")
    torch = new.environment.torch
    now = new.scenarios["c3_summed"].outputs[0].text
    assert drift.report(old, new, "torch-2.9.1.json", "torch-new.json") == (
        f"drift from torch-2.9.1.json (torch 2.9.1) to torch-new.json (torch {torch}):\n"
        f"  scenario c3_summed: figures 'x.grad: tensor([ 17.5000, 116.5854, 826.9431])' -> {now!r}\n"
        "  scenario grad_twice: text Trying to backward through the graph a second time (or directly "
        "access saved [-variables-] {+tensors+} after they have already been freed). {+Saved "
        "intermediate values of the graph are freed when you call "
        ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through "
        "the graph a second time or if you need to access saved tensors after calling backward.+}\n"
    )


def test_drift_report_lists_claims_that_no_longer_hold(snapshot_data):
    new = copy.deepcopy(snapshot_data)
    new["scenarios"]["c2_detach"]["outputs"][1]["values"][3] = 5
    new["scenarios"]["c2_detach"]["outputs"][1]["text"] = "graph depth at step 2 is 5"
    old = snap.parse(json.dumps(snapshot_data), "old")
    report = drift.report(old, snap.parse(json.dumps(new), "new"), "a.json", "b.json")
    assert report.splitlines()[1:] == [
        "  scenario c2_detach: figures 'graph depth at step 2 is 4' -> 'graph depth at step 2 is 5'",
        "claims that no longer hold (rewrite them in backtwice/claims.py):",
        "  section 'cause-2': detached_depth_constant (depths per step are [4, 5, 4, 4], not constant)",
    ]


def test_unchanged_captures_report_no_drift(snapshot_data):
    same = snap.parse(json.dumps(snapshot_data), "x")
    assert drift.report(same, same, "a", "b").splitlines()[1] == "  no scenario or loop changed"


def test_matrix_shows_each_version_and_the_changed_text(two_versions):
    html = render_page(snap.load_dir(two_versions), REPRO)
    matrix = re.search(r'<table class="matrix">.*?</table>', html, re.S).group(0)
    newest = snap.load_dir(two_versions)[-1][1].environment.torch
    assert re.findall(r'<th scope="col">torch ([^<]+)</th>', matrix) == ["2.9.1", newest]
    rows = dict(re.findall(r'<tr><th scope="row">(\w+)</th>(.*?)</tr>', matrix))
    assert len(rows) == len(load_manifest(REPRO))
    changed = [name for name, cells in rows.items() if "text differs" in cells]
    assert changed == ["grad_twice"]
    cell = re.search(r"<td>raises, text differs: (.*?)</td>", rows["grad_twice"]).group(1)
    assert cell.count("<del>") == 1 and cell.count("<ins>") == 2
    assert "access saved <del>variables</del> <ins>tensors</ins> after they have" in cell
    assert "already been freed). <ins>Saved intermediate values" in cell
    assert rows["c2_detach"] == "<td>runs</td><td>runs</td>"


def test_one_snapshot_has_no_matrix(built_html):
    assert 'class="matrix"' not in built_html and 'id="versions"' not in built_html


def test_page_text_comes_from_the_newest_version(two_versions):
    html = render_page(snap.load_dir(two_versions), REPRO)
    assert OLD_WORDING not in re.sub(r'<table class="matrix">.*?</table>', "", html, flags=re.S)


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory):
    """Another interpreter path: a venv that sees this interpreter's torch.

    --system-site-packages alone would see the base interpreter's packages, not those of the
    virtual environment the tests run in, so a .pth file adds this interpreter's site-packages.
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
    Path(purelib, "parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def test_python_option_gives_the_same_snapshot(tmp_path, venv_python, snapshot_data):
    snapshots = {}
    for name, extra in (("plain", []), ("other", ["--python", venv_python])):
        folder = tmp_path / name
        result = build("--snapshots", folder, "--out", tmp_path / f"{name}-site", *extra)
        assert result.returncode == 0, result.stderr
        (path,) = folder.glob("torch-*.json")
        snapshots[name] = path.read_bytes()
    assert snapshots["plain"] == snapshots["other"]
    assert (
        json.loads(snapshots["plain"])["environment"]["torch"]
        == snapshot_data["environment"]["torch"]
    )


def test_python_that_does_not_exist(tmp_path):
    result = build(
        "--python", tmp_path / "nope", "--snapshots", tmp_path / "s", "--out", tmp_path / "o"
    )
    assert result.returncode == EXIT_INPUT
    assert result.stderr == (
        f"error: {tmp_path / 'nope'}: cannot be run (No such file or directory); give --python a "
        "Python interpreter that has torch; nothing was written\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_python_without_torch(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True
    )
    python = tmp_path / "bare" / "bin" / "python"
    result = build("--python", python, "--snapshots", tmp_path / "s", "--out", tmp_path / "o")
    assert result.returncode == EXIT_CAPTURE
    assert result.stderr == (
        f"error: {python}: exited with code 1 before it could run a scenario (ModuleNotFoundError: "
        "No module named 'torch'); install torch in it; nothing was written\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bare"]


def test_python_that_crashes(tmp_path):
    crashing = tmp_path / "python"
    crashing.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crashing.chmod(0o755)
    result = build("--python", crashing, "--snapshots", tmp_path / "s", "--out", tmp_path / "o")
    assert result.returncode == EXIT_CAPTURE
    assert result.stderr == (
        f"error: {crashing}: was killed by signal 11 before it could run a scenario; "
        "check that it runs; nothing was written\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["python"]


def test_new_torch_capture_prints_drift_against_the_newest_other(tmp_path, snapshot_data):
    folder = tmp_path / "snapshots"
    folder.mkdir()
    old = older(snapshot_data)
    (folder / "torch-2.9.1.json").write_text(json.dumps(old), encoding="utf-8")
    result = build("--snapshots", folder, "--out", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    torch = snapshot_data["environment"]["torch"]
    assert lines[1] == f"wrote {folder / snap.file_name(torch)}"
    assert (
        lines[2]
        == f"drift from torch-2.9.1.json (torch 2.9.1) to {snap.file_name(torch)} (torch {torch}):"
    )
    assert [line.split(":")[0] for line in lines[3:5]] == [
        "  scenario c3_summed",
        "  scenario grad_twice",
    ]
    assert 'class="matrix"' in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
