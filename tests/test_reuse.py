"""A build takes a diagnoser case's record from the snapshot it replaces when nothing that
record depends on changed, and runs only the cases whose inputs did; --check and --recapture
run every case.

Most tests capture a small project in tmp_path: one scenario in repro/ and three cases in
tests/diagnose_cases/ beside it, each of which notes in a file that it ran.
"""

import copy
import dataclasses
import json
import shutil

import pytest

from backtwice import capture as capture_module
from backtwice import manifest, reuse
from backtwice import snapshot as snap
from backtwice.errors import EXIT_CHECK

from .conftest import REPRO, ROOT, committed_path, tamper_a_fix
from .test_cli import build

RAN = "BACKTWICE_TEST_RAN"  # the file each case notes its name in when it runs
NOTE = "import os\nwith open(os.environ['{ran}'], 'a') as handle:\n    handle.write('{name}\\n')\n"
CASES = {
    "twice.py": """\
import torch

w = torch.ones(3, requires_grad=True)
loss = (w.exp() * 2).sum()
loss.backward()
loss.backward()
""",
    "clean.py": """\
import torch

w = torch.ones(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
for step in range(2):
    opt.zero_grad()
    (w * w).sum().backward()
    opt.step()
print(w)
""",
    "carried.py": """\
import torch

w = torch.ones(3, requires_grad=True)
h = torch.zeros(3)
for step in range(2):
    h = h * 0.5 + w.exp()
    h.sum().backward()
""",
}
SCENARIO = "import sys\nprint('stdin holds', repr(sys.stdin.read()))\n"


def write_case(cases, name, body):
    """Write a case that notes its name, then runs `body`."""
    (cases / name).write_text(NOTE.format(ran=RAN, name=name) + body, encoding="utf-8")


def make_project(folder):
    """Write the small project into folder; return (repro, cases folder, snapshot folder)."""
    repro = folder / "repro"
    repro.mkdir()
    (repro / "scenarios.toml").write_text('[[scenario]]\nid = "one"\nexpect = "runs"\n')
    (repro / "one.py").write_text(SCENARIO, encoding="utf-8")
    cases = folder / manifest.CASES
    cases.mkdir(parents=True)
    for name, body in CASES.items():
        write_case(cases, name, body)
    return repro, cases, folder / "snapshots"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A small project: repro/ with one scenario, three cases beside it, an empty snapshot
    folder; returns (repro, cases folder, snapshot folder)."""
    monkeypatch.setenv(RAN, str(tmp_path / "ran"))
    return make_project(tmp_path)


@pytest.fixture(scope="session")
def first_build(tmp_path_factory):
    """The small project's first build (every case runs), made once for the tests that start
    from its snapshot: (file name, bytes). A test's own first build writes the same bytes (the
    same files and date; a snapshot records no path), as
    test_a_build_with_nothing_changed_runs_no_case_and_leaves_the_snapshot_untouched, which
    makes its own, checks."""
    folder = tmp_path_factory.mktemp("first-build")
    repro, _, snapshots = make_project(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(RAN, str(folder / "ran"))
        _, ran, placed = build_small(repro, snapshots)
    assert ran == sorted(CASES) and placed.written
    return placed.path.name, placed.path.read_bytes()


def built_once(folder, first_build):
    """Put the first build's snapshot into folder, as the test's own first build would; return
    its path."""
    name, data = first_build
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def build_small(repro, folder, today="2026-01-01", reuse_from=True):
    """Capture the small project and write its snapshot as a build does (it has no page);
    return (the line the capture said, the case files that ran, the Placed)."""
    said = []
    ran = repro.parent / "ran"
    ran.unlink(missing_ok=True)
    fresh = capture_module.capture(
        repro, say=said.append, today=today, reuse_from=folder if reuse_from else None
    )
    _, (placed,) = snap.combine([fresh], folder, said.append)
    if placed.written:
        snap.write_all([(placed.path, snap.dumps(placed.fresh))])
    names = sorted(ran.read_text().split()) if ran.exists() else []
    return said[0], names, placed


def test_a_build_with_nothing_changed_runs_no_case_and_leaves_the_snapshot_untouched(
    project, first_build
):
    repro, _, folder = project
    line, ran, placed = build_small(repro, folder)
    assert ran == sorted(CASES)
    assert line.startswith(
        f"ran 1 scenarios and loops and 3 of 3 diagnoser cases (none reused: no "
        f"{placed.path.name} to take them from) in "
    )
    before = placed.path.read_bytes()
    assert (placed.path.name, before) == first_build  # what built_once() gives the others
    line, ran, placed = build_small(repro, folder, today="2026-02-02")
    assert ran == []
    assert line.startswith(
        "ran 1 scenarios and loops and 0 of 3 diagnoser cases (3 reused, unchanged since the "
        "capture) in "
    )
    assert not placed.written
    assert placed.path.read_bytes() == before
    stored = snap.load(placed.path)
    assert stored.scenarios["one"].outputs[0].text == "stdin holds ''"  # not the build's lines
    assert stored.cases["twice.py"].ended == "RuntimeError"
    assert stored.cases["twice.py"].report["cause"] == "same-loss-twice"


def test_an_edited_case_alone_runs_again_and_the_others_stay_byte_for_byte(project, first_build):
    repro, cases, folder = project
    before = json.loads(built_once(folder, first_build).read_text(encoding="utf-8"))
    write_case(
        cases,
        "clean.py",
        CASES["clean.py"] + "loss = w.exp().sum()\nloss.backward()\nloss.backward()\n",
    )
    line, ran, placed = build_small(repro, folder, today="2026-02-02")
    assert ran == ["clean.py"]
    assert line.startswith(
        "ran 1 scenarios and loops and 1 of 3 diagnoser cases (2 reused, unchanged since the "
        "capture) in "
    )
    after = json.loads(placed.path.read_text(encoding="utf-8"))
    assert before["cases"]["clean.py"]["ended"] is None
    assert after["cases"]["clean.py"]["ended"] == "RuntimeError"  # its record is the new run's
    for name in ("twice.py", "carried.py"):
        assert after["cases"][name] == before["cases"][name]
    stored = placed.path.read_text(encoding="utf-8")
    for name in ("twice.py", "carried.py"):  # the reused records, as text, as they were
        record = json.dumps(before["cases"][name], indent=2, ensure_ascii=False, sort_keys=True)
        assert "\n".join("    " + line for line in record.splitlines())[4:] in stored


def test_an_edited_harness_runs_every_case_and_the_snapshot_names_the_new_code(
    project, tmp_path, monkeypatch, first_build
):
    repro, _, folder = project
    before = built_once(folder, first_build).read_text(encoding="utf-8")
    edited = tmp_path / "harness.py"
    edited.write_text(
        capture_module.HARNESS.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8"
    )
    monkeypatch.setattr(capture_module, "HARNESS", edited)
    line, ran, placed = build_small(repro, folder, today="2026-02-02")
    assert ran == sorted(CASES)
    assert line.startswith(
        "ran 1 scenarios and loops and 3 of 3 diagnoser cases (none reused: "
        f"backtwice/harness.py, capture.py or child.py changed since {placed.path.name} was captured) in "
    )
    # The same records: the file changes in its `harness` alone, its date kept.
    assert placed.written and placed.same_records
    old, new = json.loads(before), json.loads(placed.path.read_text(encoding="utf-8"))
    assert new["harness"] == reuse.harness_digest(edited) != old["harness"]
    assert {**new, "harness": old["harness"]} == old
    _, ran, placed = build_small(repro, folder)
    assert (ran, placed.written) == ([], False)  # and the next build reuses them again


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            lambda d: d["sources"].update({manifest.DIAGNOSER: "0" * 64}),
            "backtwice/diagnose.py changed since {name} was captured",
        ),
        (
            lambda d: d["sources"].update({"one.py": "0" * 64}),
            "repro/one.py changed since {name} was captured",
        ),
        (
            lambda d: d["environment"].update(torch="2.12.0"),
            "{name} was captured with torch 2.12.0{build}, Python {python}",
        ),
        (
            lambda d: d["environment"].update(build="cu999"),
            "{name} was captured with torch {torch}+cu999, Python {python}",
        ),
        (
            lambda d: d["environment"].update(python="3.10.0"),
            "{name} was captured with torch {torch}{build}, Python 3.10.0, ",
        ),
        (
            lambda d: d["environment"].update(platform="Darwin arm64"),
            "{name} was captured with torch {torch}{build}, Python {python}, Darwin arm64, ",
        ),
        (
            lambda d: d["environment"].update(variables="0" * 64),
            "{name} was captured under other TORCH*, MKL_*, OMP_* or CUDA* variables",
        ),
    ],
    ids=["diagnoser", "repro-file", "torch", "build-tag", "python", "platform", "variables"],
)
def test_another_diagnoser_repro_or_environment_in_the_snapshot_runs_every_case(
    project, change, why, first_build
):
    repro, _, folder = project
    path = built_once(folder, first_build)
    env = snap.load(path).environment
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    line, ran, _ = build_small(repro, folder)
    assert ran == sorted(CASES)
    build_tag = f"+{env.build}" if env.build else ""
    expected = why.format(name=path.name, torch=env.torch, build=build_tag, python=env.python)
    assert line.startswith(
        f"ran 1 scenarios and loops and 3 of 3 diagnoser cases (none reused: {expected}"
    ), line


def test_other_torch_variables_in_the_build_run_every_case(project, monkeypatch, first_build):
    repro, _, folder = project
    built_once(folder, first_build)
    # The cache folder torch puts in os.environ on importing torch._dynamo (as this test
    # process may have done) is torch's own: a build it starts reuses all the same.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder.parent / "inductor"))
    _, ran, _ = build_small(repro, folder)
    assert ran == []
    monkeypatch.setenv("TORCH_BACKTWICE_TEST", "1")  # a name torch's own variables start with
    line, ran, again = build_small(repro, folder)
    assert ran == sorted(CASES)
    assert "(none reused: " in line and "under other TORCH*" in line, line
    assert not again.written  # the same records under other variables: the file stays


def test_a_build_without_reuse_runs_every_case(project, first_build):
    repro, _, folder = project
    built_once(folder, first_build)
    line, ran, _ = build_small(repro, folder, reuse_from=False)
    assert ran == sorted(CASES)
    assert line.startswith("ran 1 scenarios and loops and 3 diagnoser cases in ")


def test_same_records_under_another_build_tag_keep_the_file_as_it_is(project, first_build):
    # The code changed but the capture ran with another wheel: nothing says this code made
    # these records with that wheel, so the file keeps its old `harness` and reruns next time.
    repro, _, folder = project
    current = snap.load(built_once(folder, first_build))
    other = dataclasses.replace(
        current,
        harness="0" * 64,
        environment=dataclasses.replace(current.environment, build="cu999"),
    )
    _, (kept,) = snap.combine([other], folder, lambda _: None)
    assert not kept.written
    _, (renamed,) = snap.combine(
        [dataclasses.replace(current, harness="0" * 64)], folder, lambda _: None
    )
    assert renamed.written and renamed.same_records
    assert renamed.fresh == dataclasses.replace(current, harness="0" * 64)


# The project's own cases, with the committed snapshot -----------------------------------


def test_the_page_shows_no_case_report(doctor):
    # Cases are the diagnoser's test fixtures, reused by a build: were a report on the page,
    # that case would be page content and would have to run in every build.
    plain = doctor(lambda data: None).read_text(encoding="utf-8")

    def scramble(data):
        for record in data["cases"].values():
            record["ended"] = "ValueError"
            record["report"] = {"scrambled": True}

    assert doctor(scramble).read_text(encoding="utf-8") == plain


@pytest.fixture
def tampered(snapshots_copy, snapshot_data):
    """The committed snapshot with one case's fix rewritten: (folder, path, case name, text)."""
    folder, path = snapshots_copy
    data = copy.deepcopy(snapshot_data)
    name = tamper_a_fix(data)
    path.write_text(snap.dumps(snap.parse(json.dumps(data), path)), encoding="utf-8")
    return folder, path, name, path.read_bytes()


def _counts():
    jobs = len(manifest.load_manifest(REPRO)) + len(
        capture_module.loop_jobs(manifest.load_loop_builder(REPRO), REPRO)
    )
    return jobs, len(manifest.load(REPRO).cases)


def test_check_runs_every_case_and_catches_a_tampered_record(tampered, tmp_path, checked):
    folder, path, name, before = tampered
    jobs, cases = _counts()
    # A build, here with --python (build() names the warm capture interpreter), trusts it:
    # nothing the record depends on changed.
    result = build("--snapshots", folder, "--out", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        f"ran {jobs} scenarios and loops and 0 of {cases} diagnoser cases ({cases} reused"
    )
    assert path.read_bytes() == before
    # --check does not: `checked` (conftest.py) ran it on a copy with the same case's fix
    # tampered with (and one scenario's line moved, which test_cli.py reads).
    result = checked.result
    assert result.returncode == EXIT_CHECK, result.stdout + result.stderr
    assert result.stdout.startswith(
        f"ran {jobs} scenarios and loops and {cases} diagnoser cases in "
    )
    assert '-        "fix": "Tampered with.",\n' in result.stdout
    assert result.stderr == (
        f"error: {checked.path}: differs from a fresh capture (diff above); "
        "run `python build.py` to update it and commit the result\n"
    )
    assert checked.path.read_text(encoding="utf-8") == checked.before


def test_recapture_runs_every_case_and_puts_back_a_tampered_record(recaptured):
    # `recaptured` (conftest.py): --recapture on a copy of the committed snapshot with one
    # case's fix tampered with; a build would trust that record (above), --recapture does not.
    jobs, cases = _counts()
    result = recaptured.result
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ran {jobs} scenarios and loops and {cases} diagnoser cases in " in result.stdout
    case = recaptured.case
    assert snap.load(recaptured.path).cases[case] == snap.load(committed_path()).cases[case]


def test_the_committed_snapshot_of_the_pin_names_this_capture_code():
    # Else every build reruns every case until one writes it again: run `python build.py` and
    # commit snapshots/torch-X.Y.Z.json.
    assert snap.load(committed_path()).harness == reuse.harness_digest(), (
        "backtwice/harness.py, capture.py or child.py changed: run `python build.py` and commit "
        f"{committed_path().relative_to(ROOT)}"
    )


def test_the_reuse_key_reads_the_code_that_runs(tmp_path):
    copy_of = tmp_path / "harness.py"
    shutil.copy(capture_module.HARNESS, copy_of)
    assert reuse.harness_digest(copy_of) == reuse.harness_digest()
    copy_of.write_text(copy_of.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert reuse.harness_digest(copy_of) != reuse.harness_digest()


def test_every_case_runs_every_case_for_the_bench(snapshots_copy, tmp_path):
    folder, path = snapshots_copy
    before = path.read_bytes()
    jobs, cases = _counts()
    result = build("--every-case", "--snapshots", folder, "--out", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        f"ran {jobs} scenarios and loops and {cases} diagnoser cases in "
    )
    assert f"unchanged: {path}" in result.stdout
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("change", "same"),
    [
        (lambda d: d["environment"].update(captured="1999-01-01"), True),
        (lambda d: d["environment"].update(build="cu999"), True),
        (lambda d: d["environment"].update(variables="0" * 64), True),
        (lambda d: d.update(harness="0" * 64), True),
        (lambda d: d["environment"].update(python="3.10.0"), False),
        (lambda d: d["scenarios"]["c1_backward_twice"]["raised"].update(line=5), False),
        (lambda d: d["cases"][sorted(d["cases"])[0]]["report"].update(fix="other"), False),
        (lambda d: d["sources"].update({"c1_fixed.py": "0" * 64}), False),
    ],
    ids=["date", "build-tag", "variables", "harness", "python", "scenario", "case", "source"],
)
def test_same_records_agrees_with_comparable(snapshot_data, change, same):
    # combine() decides whether to write with same_records(), the diff of --check shows
    # comparable(): they must never disagree.
    old = snap.parse(json.dumps(snapshot_data), "old.json")
    data = copy.deepcopy(snapshot_data)
    change(data)
    new = snap.parse(json.dumps(data), "new.json")
    assert old.same_records(new) is same
    assert (old.comparable() == new.comparable()) is same
