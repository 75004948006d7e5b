"""Several torch versions: --python, the version matrix, word diffs and the drift report."""

import copy
import importlib.metadata
import json
import re
import subprocess
import sys

import pytest

from backtwice import drift, recapture, versions
from backtwice import snapshot as snap
from backtwice.errors import (
    EXIT_CAPTURE,
    EXIT_INPUT,
    EXIT_USAGE,
    ClaimError,
    InputError,
    InstallError,
)
from backtwice.manifest import load_manifest
from backtwice.render import FRAMEWORKS, only, render_page

from .conftest import REPRO, ROOT, SNAPSHOTS, build_from
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
    section = re.search(r'<details id="outcomes">.*?</details>', html, re.S).group(0)
    matrix = re.search(r'<table class="matrix">.*?</table>', section, re.S).group(0)
    newest = snap.load_dir(two_versions)[-1][1].environment.torch
    assert re.findall(r'<th scope="col">([\d.]+)</th>', matrix) == ["2.9.1", newest]
    rows = dict(re.findall(r'<tr id="row-(\w+)"><th scope="row">.*?</th>(.*?)</tr>', matrix))
    # Only the scenario that differs between the versions has a row; the rest agree.
    assert rows == {"grad_twice": "<td>raises*</td><td>raises</td>"}
    assert "grad_twice" in {s.id for s in load_manifest(REPRO)}
    (change,) = re.findall(r'<figure class="change">(.*?)</figure>', section, re.S)
    assert f"torch 2.9.1 → {newest} (struck: 2.9.1; underlined: {newest}):" in change
    diff = re.search(r'<p class="word-diff">(.*)</p>', change).group(1)
    assert diff.count("<del>") == 1 and diff.count("<ins>") == 2
    # Struck: the old version's word; inserted: the newest's.
    assert "access saved <del>variables</del> <ins>tensors</ins> after they have" in diff
    assert "already been freed). <ins>Saved intermediate values" in diff


def test_older_wordings_say_today_s_text_only_if_every_version_raised_it(tmp_path, snapshot_data):
    old = copy.deepcopy(snapshot_data)
    old["environment"]["torch"] = "2.9.1"
    old["scenarios"]["c1_backward_twice"]["raised"]["message"] = OLD_WORDING
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for data in (old, snapshot_data):
        (folder / snap.file_name(data["environment"]["torch"])).write_text(json.dumps(data))
    with pytest.raises(ClaimError, match=r"the check 'same_wording' failed \(torch 2\.9\.1 raised"):
        render_page(snap.load_dir(folder), REPRO)


def test_one_snapshot_has_no_matrix(tmp_path, snapshot_data):
    html = build_from(snapshot_data, tmp_path)
    assert 'id="versions"' not in html and 'class="change"' not in html
    assert 'class="matrix"' not in html and 'id="row-' not in html


def test_a_matrix_row_for_each_scenario_that_differs_and_none_other(tmp_path, snapshot_data):
    old = copy.deepcopy(snapshot_data)
    old["environment"]["torch"] = "2.9.1"
    # Raised on the older version, where the newest runs.
    old["scenarios"]["c2_detach"]["raised"] = old["scenarios"]["grad_twice"]["raised"]
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for data in (old, snapshot_data):
        (folder / snap.file_name(data["environment"]["torch"])).write_text(json.dumps(data))
    html = render_page(snap.load_dir(folder), REPRO)
    rows = dict(re.findall(r'<tr id="row-(\w+)"><th scope="row">.*?</th>(.*?)</tr>', html))
    assert rows == {"c2_detach": "<td>raises</td><td>runs</td>"}


def test_committed_page_covers_every_committed_version(built_html):
    names = sorted(path.name for path in SNAPSHOTS.glob("torch-*.json"))
    versions = [name.removeprefix("torch-").removesuffix(".json") for name in names]
    versions.sort(key=lambda v: tuple(map(int, v.split("."))))
    matrix = re.search(r'<table class="matrix">.*?</table>', built_html, re.S).group(0)
    assert re.findall(r'<th scope="col">([\d.]+)</th>', matrix) == versions
    assert re.search(
        r"<title>[^<]*run on torch " + re.escape(versions[-1]) + "</title>", built_html
    )


def test_page_text_comes_from_the_newest_version(two_versions):
    html = render_page(snap.load_dir(two_versions), REPRO)
    rest = re.sub(r'<details id="(outcomes|older)">.*?</details>', "", html, flags=re.S)
    assert OLD_WORDING not in rest


@pytest.fixture(scope="module")
def first_capture(tmp_path_factory, snapshot_data):
    """A plain build (no --python) into a folder that holds only an older torch's snapshot
    (older()): this torch's first capture there, every scenario and every case run (it finds
    no record of this torch to reuse). Made once, for the tests in conftest.py's
    TOGETHER["first_capture"]: (the completed build, the snapshot folder, the --out folder)."""
    tmp_path = tmp_path_factory.mktemp("first-capture")
    folder = tmp_path / "snapshots"
    folder.mkdir()
    (folder / "torch-2.9.1.json").write_text(json.dumps(older(snapshot_data)), encoding="utf-8")
    result = build("--snapshots", folder, "--out", tmp_path / "site")
    return result, folder, tmp_path / "site"


def test_python_option_gives_the_same_snapshot(tmp_path, venv_python, snapshot_data, first_capture):
    snapshots = {}
    # The plain capture is first_capture's, which takes nothing from the older snapshot beside it.
    result, folder, _ = first_capture
    assert result.returncode == 0, result.stderr
    snapshots["plain"] = (
        folder / snap.file_name(snapshot_data["environment"]["torch"])
    ).read_bytes()
    folder = tmp_path / "other"
    result = build("--snapshots", folder, "--out", tmp_path / "other-site", "--python", venv_python)
    assert result.returncode == 0, result.stderr
    (path,) = folder.glob("torch-*.json")
    snapshots["other"] = path.read_bytes()
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


def test_new_torch_capture_prints_drift_against_the_newest_other(snapshot_data, first_capture):
    result, folder, site = first_capture
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
    assert 'class="matrix"' in (site / "index.html").read_text(encoding="utf-8")


def test_summary_names_what_held_and_what_changed(two_versions, snapshot_data):
    snapshots = snap.load_dir(two_versions)
    scenarios, loops = len(snapshot_data["scenarios"]), len(snapshot_data["loops"])
    assert versions.summary(snapshots) == (
        f"All {scenarios} scenarios and {loops} checker loops "
        "agree on whether it raises, the line that raised and the node anomaly mode names in a "
        "scenario; older "
        "versions differ in the exception text of 1 scenario (torch 2.9.1) and the printed "
        "numbers of 1 scenario (torch 2.9.1)."
    )
    html = render_page(snapshots, REPRO)
    # The page's sentence is of the scenarios it shows: frameworks.html has the framework loops'.
    shown = only(snapshots, lambda ident: not ident.startswith(FRAMEWORKS), True)
    assert f'<p id="versions">{versions.summary(shown)}</p>' in html


def test_summary_counts_scenarios_and_loops(tmp_path, snapshot_data):
    old = copy.deepcopy(snapshot_data)
    old["environment"]["torch"] = "2.0.1"
    loops = sorted(key for key, run in old["loops"].items() if run["raised"])
    for key in loops:
        old["loops"][key]["raised"]["line"] += 1
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for data in (old, snapshot_data):
        (folder / snap.file_name(data["environment"]["torch"])).write_text(json.dumps(data))
    sentence = versions.summary(snap.load_dir(folder))
    assert (
        f"older versions differ in the line that raised of {len(loops)} loops (torch 2.0.1)."
        in sentence
    )
    assert (
        "agree on whether it raises, the exception text, the node anomaly mode names in a scenario "
        "and the "
        "printed numbers;" in sentence
    )


def test_committed_summary_agrees_with_the_snapshots(built_html):
    snapshots = snap.load_dir(SNAPSHOTS)
    compared = []
    for _, s in snapshots:
        data = s.comparable()
        del data["environment"]
        compared.append(data)
    sentence = re.search(r'<p id="versions">(.*?)</p>', built_html).group(1)
    all_same = all(data == compared[-1] for data in compared)
    assert ("older versions differ in" in sentence) == (not all_same)


# The recapture command, without installing anything: fake environments whose python answers the
# probe with a version, or fails it.


def fake_env(envs, version, script):
    """Make ENVS/torch-VERSION/bin/python a shell script."""
    python = envs / f"torch-{version}" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n" + script + "\n")
    python.chmod(0o755)
    return python


def pin():
    """The capture pin, read from pyproject.toml's text independently of recapture.py."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(r'^capture = \["torch==([\d.]+)"', text, re.M).group(1)


def pin_line(envs):
    """The plan's line for the pin: this interpreter when its torch is the pin."""
    try:
        here = importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        here = None
    if here == pin():
        return f"  torch {pin()}: this interpreter, {sys.executable}"
    return f"  torch {pin()}: create {envs / f'torch-{pin()}'} with pip install torch=={pin()} numpy==2.4.6"


@pytest.fixture
def kept(tmp_path):
    """A snapshot folder keeping 2.0.1 and 2.8.0 (names only), and an empty envs folder."""
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for version in ("2.0.1", "2.8.0"):
        (folder / f"torch-{version}.json").write_text("kept", encoding="utf-8")
    return folder, tmp_path / "envs"


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_dry_run_says_what_it_reuses_and_installs(tmp_path, kept):
    folder, envs = kept
    fake_env(envs, "2.8.0", "echo 2.8.0+cu128")
    before = listing(tmp_path)
    result = build(
        "--recapture",
        "2.14.1",
        "--dry-run",
        "--envs",
        envs,
        "--snapshots",
        folder,
        "--out",
        tmp_path / "site",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "recapture 4 torch versions (snapshots/, the capture pin, those named): "
        f"2.0.1, 2.8.0, {pin()}, 2.14.1",
        f"  torch 2.0.1: create {envs / 'torch-2.0.1'} with pip install torch==2.0.1 numpy==1.26.4",
        f"  torch 2.8.0: reuse {envs / 'torch-2.8.0'}",
        pin_line(envs),
        f"  torch 2.14.1: create {envs / 'torch-2.14.1'} with pip install torch==2.14.1 numpy==2.4.6",
        f"will install {2 + ('create' in pin_line(envs))} environments under {envs}: CUDA builds "
        "of torch, 4.4 to 6.5 GB each and 1 to 2 minutes each from the package index; they run on "
        "the CPU",
    ]
    assert listing(tmp_path) == before


def test_env_without_torch_is_installed_into(tmp_path, kept):
    folder, envs = kept
    fake_env(envs, "2.0.1", "echo \"ModuleNotFoundError: No module named 'torch'\" >&2; exit 1")
    result = build("--recapture", "--dry-run", "--envs", envs, "--snapshots", folder)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == (
        f"  torch 2.0.1: pip install torch==2.0.1 numpy==1.26.4 into {envs / 'torch-2.0.1'}"
    )


def test_env_with_another_torch_stops_the_recapture(tmp_path, kept):
    folder, envs = kept
    fake_env(envs, "2.8.0", "echo 2.7.0+cu118")
    before = listing(tmp_path)
    result = build("--recapture", "--envs", envs, "--snapshots", folder, "--out", tmp_path / "site")
    assert result.returncode == EXIT_INPUT
    assert result.stderr == (
        f"error: {envs / 'torch-2.8.0'}: holds torch 2.7.0, not 2.8.0; remove it or choose "
        "another --envs folder; nothing was written\n"
    )
    assert result.stdout == ""
    assert listing(tmp_path) == before


def test_env_whose_import_warns_stops_the_recapture(tmp_path, kept):
    folder, envs = kept
    python = fake_env(
        envs,
        "2.0.1",
        "echo 'UserWarning: Failed to initialize NumPy: _ARRAY_API not found' >&2; exit 1",
    )
    result = build("--recapture", "--dry-run", "--envs", envs, "--snapshots", folder)
    assert result.returncode == EXIT_INPUT
    assert result.stderr == (
        f"error: {python}: does not import torch and numpy cleanly (UserWarning: Failed to "
        "initialize NumPy: _ARRAY_API not found); remove its environment\n"
    )


def test_capture_failure_writes_no_snapshot(tmp_path, kept):
    folder, envs = kept
    # Answers the probe as torch 2.0.1, then dies when run as the capture harness.
    fake_env(envs, "2.0.1", 'if [ "$1" = "-W" ]; then echo 2.0.1+cu117; else exit 9; fi')
    fake_env(envs, "2.8.0", "echo 2.8.0+cu128")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    result = build("--recapture", "--envs", envs, "--snapshots", folder, "--out", tmp_path / "site")
    assert result.returncode == EXIT_CAPTURE
    assert result.stderr == (
        f"error: {envs / 'torch-2.0.1' / 'bin' / 'python'}: exited with code 9 before it could run "
        "a scenario; check that it runs; nothing was written\n"
    )
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert not (tmp_path / "site").exists()


def test_badly_named_snapshot_is_refused(tmp_path, kept):
    folder, envs = kept
    (folder / "torch-latest.json").write_text("{}")
    result = build("--recapture", "--dry-run", "--envs", envs, "--snapshots", folder)
    assert result.returncode == EXIT_INPUT
    assert result.stderr == (
        f"error: {folder / 'torch-latest.json'}: is not named torch-X.Y.Z.json; rename or remove it\n"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dry-run"], "--dry-run goes with --recapture"),
        (
            ["--recapture", "--python", "p"],
            "--recapture chooses an interpreter per version; drop --python",
        ),
        (["--recapture", "latest"], "--recapture: 'latest' is not a torch version like 2.9.1"),
    ],
)
def test_recapture_usage_errors(args, message):
    result = build(*args)
    assert result.returncode == EXIT_USAGE
    assert result.stderr.splitlines()[-1] == f"build.py: error: {message}"


def test_kept_versions_are_the_snapshots_the_pin_and_those_named(kept):
    folder, _ = kept
    (folder / "torch-2.13.0.json").write_text("kept")
    assert recapture.kept_versions(folder, "2.10.0", ["2.9.1", "2.8.0"]) == [
        "2.0.1",
        "2.8.0",
        "2.9.1",
        "2.10.0",
        "2.13.0",
    ]


@pytest.mark.parametrize(
    "version, numpy",
    [
        ("2.0.1", "numpy==1.26.4"),
        ("2.2.2", "numpy==1.26.4"),
        ("2.3.0", "numpy==2.4.6"),
        ("2.14.1", "numpy==2.4.6"),
    ],
)
def test_numpy_pin_follows_torch(version, numpy):
    assert recapture.requirements(version) == [f"torch=={version}", numpy]


def test_pin_is_read_from_the_capture_extra(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project.optional-dependencies]\ncapture = ["numpy<3", "torch == 2.9.1"]\n'
    )
    assert recapture.pinned_torch(pyproject) == "2.9.1"
    assert recapture.pinned_torch(ROOT / "pyproject.toml") == pin()
    pyproject.write_text('[project.optional-dependencies]\ncapture = ["torch>=2"]\n')
    with pytest.raises(InputError, match="the capture extra pins no torch==X.Y.Z; pin one"):
        recapture.pinned_torch(pyproject)


def test_not_enough_space_stops_before_installing(tmp_path):
    planned = [
        recapture.Env(v, tmp_path / f"torch-{v}" / "bin" / "python", "create")
        for v in ("2.0.1", "2.8.0")
    ]
    with pytest.raises(InstallError) as caught:
        recapture.check_space(planned, tmp_path, free=10 * 2**30)
    assert str(caught.value) == (
        f"{tmp_path}: has 10.0 GB free but 2 environments need up to 14 GB; free space or choose "
        "another --envs folder; nothing was installed"
    )
    recapture.check_space(planned, tmp_path, free=14 * 2**30)


def test_failed_install_removes_the_new_environment(tmp_path, monkeypatch):
    env = recapture.Env("2.8.0", tmp_path / "torch-2.8.0" / "bin" / "python", "create")
    ran = []

    def run(command, folder, what):
        ran.append(what)
        if what == "pip install":
            raise InstallError(folder, f"{what} failed (ERROR: no space left); nothing was written")
        env.python.parent.mkdir(parents=True)

    monkeypatch.setattr(recapture, "_run", run)
    with pytest.raises(InstallError, match="pip install failed"):
        recapture.install(env, lambda _: None)
    assert ran == ["python -m venv", "pip install"]
    assert list(tmp_path.iterdir()) == []


def test_recapture_reuses_an_env_and_matches_the_committed_snapshot(recaptured):
    # `recaptured` (conftest.py): --recapture on a copy of the committed snapshot with one
    # case's record tampered with, its --envs folder holding torch-X.Y.Z for this torch.
    result, here = recaptured.result, importlib.metadata.version("torch").split("+")[0]
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1] == f"  torch {here}: reuse {recaptured.envs / f'torch-{here}'}"
    assert lines[2] == "will install nothing"
    assert f"wrote {recaptured.path}" in lines
    fresh = snap.load(recaptured.path)
    assert fresh.comparable() == snap.load(SNAPSHOTS / snap.file_name(here)).comparable()
    assert (recaptured.out / "index.html").exists()


def strings(value):
    """Every string in JSON data, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_snapshots_keep_torch_internals_out():
    """No path or line inside torch, no build tag where captures are compared."""
    inside = re.compile(
        r"site-packages|dist-packages|torch/(autograd|_tensor|csrc)|\+(cu\d+|cpu|rocm)"
    )
    for path, snapshot in snap.load_dir(SNAPSHOTS):
        found = [text for text in strings(snapshot.comparable()) if inside.search(text)]
        assert found == [], path.name
        assert "+" not in snapshot.environment.torch
