"""The diagnoser's reports on tests/diagnose_cases/, as captured on every kept torch, fit their
markers."""

import copy
import dataclasses
import json
import shutil

import pytest

from backtwice import agreement, manifest
from backtwice import snapshot as snap
from backtwice.errors import InputError

from .conftest import REPRO, ROOT, SNAPSHOTS
from .diagnose_markers import NAMES, RAISING, beyond, check_report, expected

KEPT = snap.load_dir(SNAPSHOTS)
VERSIONS = [found.environment.torch for _, found in KEPT]


def test_every_kept_torch_is_read():
    assert {"2.0.1", "2.8.0", "2.13.0", "2.14.1"} <= set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_each_snapshot_holds_every_case(version):
    (found,) = [s for _, s in KEPT if s.environment.torch == version]
    assert sorted(found.cases) == NAMES
    hashes = manifest.load(REPRO).hashes()
    for name in NAMES:
        key = f"{manifest.CASES}/{name}"
        assert found.sources[key] == hashes[key], name


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("version", VERSIONS)
def test_recorded_report_fits_the_markers(version, name):
    (found,) = [s for _, s in KEPT if s.environment.torch == version]
    run = found.cases[name]
    if beyond(name, version):
        pytest.skip("torch 2.0 cannot run this case, date its nodes or see them (diagnose_markers)")
    ended = expected(name)[1].get("ended")
    if name in RAISING:
        assert run.ended == "RuntimeError", run.ended
    elif ended:  # an error that is not the diagnoser's to explain
        assert run.ended == ended[0], run.ended
    else:
        assert run.ended in (None, "SystemExit"), run.ended
    check_report(run.report, name, name)


def test_no_report_names_a_path_of_this_machine():
    for _, found in KEPT:
        for name, run in found.cases.items():
            text = json.dumps(run.report)
            assert str(ROOT) not in text, (found.environment.torch, name)
            files = [e["file"] for e in run.report["lines"]]
            files += [
                run.report[k]["file"] for k in ("raised", "freed_by", "node") if run.report[k]
            ]
            assert all(f == name for f in files), (found.environment.torch, name, files)
            assert "torch" not in run.report  # the environment names it, build tag aside


@pytest.fixture
def project_copy(tmp_path):
    """A copy of repro/ with the diagnoser's cases beside it, as in the project."""
    for folder in ("repro", manifest.CASES):
        shutil.copytree(
            ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    return tmp_path


def test_a_case_edit_makes_every_snapshot_stale(project_copy):
    case = project_copy / manifest.CASES / "gan.py"
    case.write_text(case.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        agreement.check(KEPT, manifest.load(project_copy / "repro"))
    assert "field 'sources.tests/diagnose_cases/gan.py' does not match" in str(caught.value)


def test_a_new_case_makes_every_snapshot_stale(project_copy):
    (project_copy / manifest.CASES / "zz_new.py").write_text("import torch\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        agreement.check(KEPT, manifest.load(project_copy / "repro"))
    assert "field 'sources.tests/diagnose_cases/zz_new.py' is missing" in str(caught.value)


def test_a_removed_case_makes_every_snapshot_stale(project_copy):
    (project_copy / manifest.CASES / "gan.py").unlink()
    with pytest.raises(InputError) as caught:
        agreement.check(KEPT, manifest.load(project_copy / "repro"))
    assert "'sources.tests/diagnose_cases/gan.py' names a file the capture no longer runs" in str(
        caught.value
    )


def test_the_snapshot_holds_exactly_the_cases_on_disk(project_copy):
    repro = manifest.load(project_copy / "repro")
    path, found = KEPT[-1]
    extra = dataclasses.replace(found, cases={**found.cases, "zz_new.py": found.cases["gan.py"]})
    with pytest.raises(InputError) as caught:
        agreement.check_contents(path, extra, repro)
    assert "field 'cases.zz_new.py' is not in tests/diagnose_cases/" in str(caught.value)
    fewer = dict(found.cases)
    del fewer["gan.py"]
    with pytest.raises(InputError) as caught:
        agreement.check_contents(path, dataclasses.replace(found, cases=fewer), repro)
    assert "field 'cases.gan.py' is missing" in str(caught.value)


@pytest.mark.parametrize("field", ["raised", "freed_by", "node"])
def test_a_report_off_by_one_line_fails_the_checks(field):
    report = copy.deepcopy(KEPT[-1][1].cases["gan.py"].report)
    report[field]["line"] += 1
    with pytest.raises(AssertionError):
        check_report(report, "gan.py", "gan.py")
