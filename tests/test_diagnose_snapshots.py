"""The diagnoser's reports on tests/diagnose_cases/, as captured on every kept torch, fit their
markers."""

import pytest

from backtwice import manifest
from backtwice import snapshot as snap

from .conftest import REPRO, SNAPSHOTS
from .diagnose_markers import NAMES, RAISING, beyond, check_report

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
        pytest.skip("torch 2.0's Python nodes have no _sequence_nr to date them by")
    if name in RAISING:
        assert run.ended == "RuntimeError", run.ended
    else:
        assert run.ended in (None, "SystemExit"), run.ended
    check_report(run.report, name, name)
