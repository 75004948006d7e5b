"""Which diagnoser cases a build takes from the snapshot it replaces instead of running them.

A case of tests/diagnose_cases/ is a test fixture of the diagnoser: the page shows no case's
report (tests/test_reuse.py checks that). A build (`python build.py`, also with --python) runs
again only the cases whose inputs changed since the snapshot of the same torch was captured and
takes the others' records from it as they are; --check and --recapture run every case. A record
is taken only when all of these are as they were at its capture:

- the case's own text; backtwice/diagnose.py; every file of repro/ (on the case's sys.path):
  the snapshot's `sources`;
- the capture's own code, backtwice/harness.py, capture.py and child.py, which also pin the
  kernels: the snapshot's `harness`;
- what the capture interpreter reports: torch's version and build tag, Python's version, the
  platform, the device, and the variables torch and its kernels read (`environment`).
"""

import hashlib
from dataclasses import dataclass
from pathlib import Path

from . import manifest
from . import snapshot as snap
from .agreement import shown
from .errors import InputError

CODE = ("harness.py", "capture.py", "child.py")  # the capture's own code, beside this file
CODE_NAMED = f"backtwice/{', '.join(CODE[:-1])} or {CODE[-1]}"  # as messages name it
# The environment fields a record is reused under; `captured` (a date) alone is left out.
ENVIRONMENT = ("torch", "build", "python", "platform", "device", "cuda", "variables")


def harness_digest(harness=None):
    """sha256 of the capture's own code: harness.py (or the file that runs as it), capture.py
    and child.py, as the snapshot's `harness` records it."""
    folder = Path(__file__).parent
    files = [Path(harness) if harness else folder / CODE[0], *(folder / name for name in CODE[1:])]
    digest = hashlib.sha256()
    for path in files:
        digest.update(manifest.sha256(manifest.read_text(path)).encode("ascii"))
    return digest.hexdigest()


@dataclass(frozen=True)
class Reuse:
    """What a build takes from the snapshot of its torch, and why it takes no more."""

    records: dict[str, snap.CaseRun]
    """The records taken as they are, by case name."""
    why: str
    """Why the other cases run: the words after 'none reused: ', or '' when some are reused."""


def describe(environment):
    """An environment as a reader tells captures apart: 'torch 2.13.0+cpu, Python 3.11.7,
    Linux x86_64, cpu'."""
    build = f"+{environment['build']}" if environment["build"] else ""
    return (
        f"torch {environment['torch']}{build}, Python {environment['python']}, "
        f"{environment['platform']}, {environment['device']}"
    )


def _why_none(previous, name, hashes, environment, harness):
    """Why no record of `previous` can be taken, or None when those of unchanged cases can;
    `hashes` are repro's (Repro.hashes())."""
    if previous.harness != harness:
        return f"{CODE_NAMED} changed since {name} was captured"
    before = {field: getattr(previous.environment, field) for field in ENVIRONMENT}
    now = {field: environment[field] for field in ENVIRONMENT}
    differ = {field for field in ENVIRONMENT if before[field] != now[field]}
    if differ == {"variables"}:
        return f"{name} was captured under other TORCH*, MKL_*, OMP_* or CUDA* variables"
    if differ:
        return f"{name} was captured with {describe(before)}; this is {describe(now)}"
    for source, digest in hashes.items():
        if not source.startswith(manifest.CASES + "/") and previous.sources.get(source) != digest:
            return f"{shown(source)} changed since {name} was captured"
    return None


def choose(folder, repro, environment, harness):
    """The records a build may take from `folder`'s snapshot of the torch in `environment`
    (as the capture interpreter reports it), made by capture code `harness`."""
    path = Path(folder) / snap.file_name(environment["torch"])
    if not path.exists():
        return Reuse({}, f"no {path.name} to take them from")
    try:
        previous, _ = snap.load_replaceable(path)
    except InputError:  # a newer schema: the build stops on it once the capture is done
        previous = None
    if previous is None:
        return Reuse({}, f"{path.name} cannot be read")
    hashes = repro.hashes()
    why = _why_none(previous, path.name, hashes, environment, harness)
    if why is not None:
        return Reuse({}, why)
    records = {
        case.name: previous.cases[case.name]
        for case in repro.cases
        if case.name in previous.cases
        and previous.sources.get(f"{manifest.CASES}/{case.name}")
        == hashes[f"{manifest.CASES}/{case.name}"]
    }
    return Reuse(records, "" if records else "every case changed since the capture")
