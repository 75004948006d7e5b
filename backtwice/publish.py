"""Render and write: the last stage of a build, shared by a capture and a recapture."""

import time
from pathlib import Path

from . import drift, manifest
from . import snapshot as snap
from .errors import REWRITE, ClaimError


def explain(error, previous, fresh):
    """Name the capture change behind a claim that no longer holds first, then the sentence."""
    changes = drift.changes(previous[1], fresh) if previous is not None else []
    if not changes:
        return error
    named = [c for c in changes if f"'{c.ident}'" in error.reason]  # one the check names
    change = (named or changes)[0]
    ident = change.ident
    file = Path("repro") / (f"{ident}.py" if change.kind == "scenario" else manifest.LOOP_BUILDER)
    return ClaimError(
        file,
        f"{change.kind} {ident} changed since {previous[0].name} ({change.what}), so {error.check}",
        error.reason,
        error.sentence,
        f"fix {file}, or if torch really behaves so now, {REWRITE}",
    )


def publish(snapshots, placed, repro, out, say):
    """Render, then write the changed snapshots and the page together, or nothing.

    `placed` lists the fresh captures among `snapshots` (snapshot.Placed); a claim that fails
    is reported with the capture change behind it.
    """
    from .render import page_stats, render_page

    started = time.perf_counter()
    try:
        html = render_page(snapshots, repro)
    except ClaimError as error:
        explained = (explain(error, item.previous, item.fresh) for item in placed)
        raise next((e for e in explained if e is not error), error) from None
    page = out / "index.html"
    writes = [(item.path, snap.dumps(item.fresh)) for item in placed if item.written]
    snap.write_all([*writes, (page, html)])
    for item in placed:
        say(f"wrote {item.path}" if item.written else f"unchanged: {item.path}")
        if item.written and item.previous is not None:
            report = drift.report(
                item.previous[1], item.fresh, item.previous[0].name, item.path.name
            )
            say(report.rstrip("\n"))
    size = len(html.encode("utf-8"))
    say(f"wrote {page} ({size:,} bytes) in {time.perf_counter() - started:.2f} s")
    stats = page_stats(html)
    say(
        f"prose: {stats.words:,} words (target under 1,600); "
        f"full message shown {stats.messages} times (target at most 2)"
    )
