"""The page's diagnoser section, from snapshots: the reports it printed and where it was tried.

Every scenario is captured a third time under backtwice/diagnose.py. The section shows one of
those reports verbatim, and one sentence saying on which torch versions the diagnoser named the
same cause and lines; a report that contradicts the plain run stops the build.
"""

from markupsafe import Markup

from .errors import ClaimError
from .manifest import DIAGNOSER
from .versions import join

# The report shown on the page: the cause whose lines are hardest to find by eye (one report,
# not three: page weight; the others are in every snapshot).
SHOWN = ("c2_no_detach",)
CHECK = "section 'diagnoser': the check 'diagnoser_agrees'"


def _lines(diagnosis):
    """What must agree across versions: the cause and the three lines."""
    return (
        diagnosis.cause,
        diagnosis.raised.line if diagnosis.raised else None,
        diagnosis.freed_by.line if diagnosis.freed_by else None,
        diagnosis.forward.line if diagnosis.forward else None,
    )


def diagnosed(snapshot):
    """The scenarios whose error the diagnoser explained: id -> (run, diagnosis)."""
    return {
        ident: (run, run.diagnosis)
        for ident, run in sorted(snapshot.scenarios.items())
        if run.diagnosis is not None and run.diagnosis.cause is not None
    }


def check_against_plain_runs(path, snapshot):
    """The diagnoser's raising line is the line the plain run's traceback named."""
    for ident, (run, diagnosis) in diagnosed(snapshot).items():
        if run.raised is None or diagnosis.raised.line != run.raised.line:
            raise ClaimError(
                path,
                CHECK,
                f"for '{ident}' it names line {diagnosis.raised.line}, but the plain run "
                f"raised at {run.raised.line if run.raised else 'no line'}",
                "the diagnoser names the call that raised",
            )


def versions_sentence(snapshots):
    """Say on which versions the diagnoser ran and whether it named the same lines on each."""
    path, newest = snapshots[-1]
    found = diagnosed(newest)
    twice = [i for i, (_, d) in found.items() if d.cause != "inplace-after-retain"]
    versions = [s.environment.torch for _, s in snapshots]
    differ = []
    for _, snapshot in snapshots:
        theirs = diagnosed(snapshot)
        if set(theirs) != set(found) or any(
            _lines(theirs[i][1]) != _lines(d) for i, (_, d) in found.items()
        ):
            differ.append(snapshot.environment.torch)
    start = Markup(
        "Every scenario here ran under it on torch {}; for the {} that raise this "
    ).format(join(versions), len(twice))
    if not differ:
        return start + Markup("error it named the same cause and lines on each.")
    return start + Markup("error it named other causes or lines on torch {}.").format(join(differ))


def view(snapshots, repro):
    """What templates/diagnoser.html.j2 shows."""
    path, newest = snapshots[-1]
    for each_path, snapshot in snapshots:
        check_against_plain_runs(each_path, snapshot)
    titles = {s.id: s.title for s in repro.scenarios}
    reports = []
    for ident in SHOWN:
        run = newest.scenarios[ident]
        if run.diagnosis is None or run.diagnosis.text is None:
            raise ClaimError(
                path,
                CHECK,
                f"scenario '{ident}' has no diagnoser report",
                "what the diagnoser printed for the scenarios this page shows it on",
                "recapture, or change SHOWN in backtwice/diagnosis.py",
            )
        reports.append({"id": ident, "title": titles[ident], "text": run.diagnosis.text})
    return {
        "reports": reports,
        "versions": versions_sentence(snapshots),
        "lines": len(repro.sources[DIAGNOSER].splitlines()),
    }
