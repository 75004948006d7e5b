"""Check that snapshots agree with repro/ before anything is rendered from them.

A snapshot is rendered only when it was captured from the files on disk (their hashes match)
and holds exactly the scenarios that repro/scenarios.toml declares, exactly the loops that
repro/loop.py builds and exactly the diagnoser's cases in tests/diagnose_cases/, so every count
the page prints is a count of what it shows.
"""

from .errors import InputError

RECAPTURE = "run `python build.py` to capture it again"


def shown(name):
    """A hashed file as the reader finds it: repro/NAME, or a path from the top of the tree."""
    return name if "/" in name else f"repro/{name}"


def check_sources(path, snapshot, repro):
    """Stop if the snapshot was captured from other repro/ files than those read now."""
    current = repro.hashes()
    for name, digest in current.items():
        recorded = snapshot.sources.get(name)
        if recorded is None:
            raise InputError(
                path,
                f"field 'sources.{name}' is missing: {shown(name)} is newer than this snapshot; {RECAPTURE}",
            )
        if recorded != digest:
            raise InputError(
                path,
                f"field 'sources.{name}' does not match {shown(name)}, which changed since the capture; {RECAPTURE}",
            )
    gone = sorted(set(snapshot.sources) - set(current))
    if gone:
        raise InputError(
            path,
            f"field 'sources.{gone[0]}' names a file the capture no longer runs ({shown(gone[0])} is gone); {RECAPTURE}",
        )


def _same_keys(path, field, recorded, declared, source):
    unknown = sorted(set(recorded) - set(declared))
    if unknown:
        raise InputError(path, f"field '{field}.{unknown[0]}' is not in {source}; {RECAPTURE}")
    missing = [key for key in declared if key not in recorded]
    if missing:
        raise InputError(
            path, f"field '{field}.{missing[0]}' is missing; {source} declares it; {RECAPTURE}"
        )


def check_contents(path, snapshot, repro):
    """Stop unless the snapshot holds exactly the declared scenarios and the built loops."""
    declared = {s.id: s for s in repro.scenarios}
    _same_keys(path, "scenarios", snapshot.scenarios, list(declared), "repro/scenarios.toml")
    for ident, run in snapshot.scenarios.items():
        if run.expect != declared[ident].expect:
            raise InputError(
                path,
                f"field 'scenarios.{ident}.expect' is {run.expect!r} but repro/scenarios.toml "
                f"says {declared[ident].expect!r}; {RECAPTURE}",
            )
    cases = [case.name for case in repro.cases]
    _same_keys(path, "cases", snapshot.cases, cases, "tests/diagnose_cases/")
    keys = [] if repro.builder is None else [a.key for a in repro.builder.all_answers()]
    _same_keys(path, "loops", snapshot.loops, keys, "repro/loop.py's all_answers()")


def check(snapshots, repro):
    """Check every (path, Snapshot) pair against repro/ (a manifest.Repro)."""
    for path, snapshot in snapshots:
        check_sources(path, snapshot, repro)
        check_contents(path, snapshot, repro)
