"""Render and write: the last stage of a build, shared by a capture and a recapture."""

import contextlib
import re
import signal
import threading
import time
from pathlib import Path

from . import drift, manifest, reuse
from . import snapshot as snap
from .errors import EXIT_INTERRUPTED, REWRITE, ClaimError, PageError, Stopped

TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "page.html.j2"
# Control characters a scenario may print, shown as visible symbols on the page: C0 as the
# Unicode control pictures (ESC as U+241B), DEL as U+2421, C1 as a \x9b escape. Tab and newline
# are text. Snapshots keep the exact characters.
VISIBLE = {
    **{code: 0x2400 + code for code in range(0x20) if chr(code) not in "\t\n"},
    0x7F: 0x2421,
    **{code: f"\\x{code:02x}" for code in range(0x80, 0xA0)},
}


def visible(text):
    """Replace control characters with visible stand-ins; the rest of the text is unchanged."""
    return text.translate(VISIBLE)


def check_page(pages, snapshots, repro):
    """Stop unless the pages ({file name: HTML}) place every declared scenario's anchor, and the
    page that places it shows every line it printed."""
    from .render import escape_text  # as the page writes text; render loads jinja2 when used

    shown = f"templates/{TEMPLATE.name}"
    holders = {}
    for scenario in repro.scenarios:
        anchor = f'id="s-{scenario.id}"'
        holders[scenario.id] = next((h for h in pages.values() if anchor in h), None)
        if holders[scenario.id] is None:
            raise PageError(
                TEMPLATE,
                f"places no element with id=\"s-{scenario.id}\" for scenario '{scenario.id}' of "
                f"repro/scenarios.toml, so the page would link to nothing and leave out its "
                f"printed lines; add {{{{ scenario(s.{scenario.id}) }}}} to {shown} where it "
                "belongs; nothing was written",
            )
    path, snapshot = snapshots[-1]
    for scenario in repro.scenarios:
        for output in snapshot.scenarios[scenario.id].outputs:
            for line in output.text.split("\n"):
                if line.strip() and escape_text(visible(line)) not in holders[scenario.id]:
                    raise PageError(
                        TEMPLATE,
                        f"does not show the line {line!r} that scenario '{scenario.id}' printed "
                        f"(line {output.line} of repro/{scenario.id}.py, in {path.name}); the page "
                        f"shows every printed line: show them in {shown}; nothing was written",
                    )


LEFTOVER = re.compile(
    r"\.(index\.html|frameworks\.html|diagnose\.py|torch-[0-9.]+\.json)\.[A-Za-z0-9_]{8}"
)


def remove_leftovers(folders, say):
    """Remove the temporary files a build stopped while writing left (SIGKILL, power loss).

    Its snapshots were renamed into place before its page, so the page this build writes
    from the snapshots makes the pair agree again.
    """
    for folder in sorted(set(folders)):
        if not folder.is_dir():
            continue
        for leftover in sorted(folder.iterdir()):
            if LEFTOVER.fullmatch(leftover.name) and leftover.is_file():
                leftover.unlink(missing_ok=True)
                say(
                    f"notice: removed {leftover}, left by a build stopped while writing; "
                    "this build writes the page again from the snapshots"
                )


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


def _shown(path):
    """A path as the user would type it: relative to the working folder when inside it."""
    try:
        return Path(path).resolve().relative_to(Path.cwd())
    except ValueError:
        return path


HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_held():
    """Hold back stop signals while files are written; one that came is acted on after.

    Handlers, not a signal mask: a mask holds for one thread, and the capture's reader thread
    may still be there to receive the signal.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = {signum: signal.signal(signum, lambda n, _: caught.append(n)) for signum in HELD}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            handler = previous[caught[0]]
            if callable(handler):
                handler(caught[0], None)  # raises Stopped or KeyboardInterrupt
            elif handler == signal.SIG_DFL:
                signal.raise_signal(caught[0])


def finished_pages(snapshots, repro):
    """The pages of these snapshots ({file name: HTML}), as they are written: rendered, control
    characters made visible, and checked against them; raise ClaimError (or InputError) where
    they cannot be."""
    from .render import render_pages

    pages = {name: visible(html) for name, html in render_pages(snapshots, repro).items()}
    check_page(
        pages, snapshots, repro if isinstance(repro, manifest.Repro) else manifest.load(repro)
    )
    return pages


TOOL = "diagnose.py"
"""The diagnoser, written beside the page it is linked from (href="diagnose.py")."""


def site(pages, repro):
    """The files of the site, by name: the pages and, beside them, the diagnoser as repro/ read
    it (the text the snapshot's hashes and the page's reports are of), byte for byte."""
    if not isinstance(repro, manifest.Repro):
        repro = manifest.load(repro)
    return {**pages, TOOL: repro.sources[manifest.DIAGNOSER]}


def publish(snapshots, placed, repro, out, say, ahead=None):
    """Render, then write the changed snapshots, the pages and the diagnoser together, or nothing.

    `placed` lists the fresh captures among `snapshots` (snapshot.Placed); a claim that fails
    is reported with the capture change behind it. `ahead`, if given, is (snapshots, pages) from
    finished_pages() while the capture ran: when those snapshots equal these, the pages are
    those, since they are a function of the snapshots and repro/ alone. A stop signal (Ctrl-C,
    SIGTERM, SIGHUP) that comes once the files are being written waits until they are; the
    build then stops saying so (Stopped with written=True).
    """
    started = time.perf_counter()
    if ahead is not None and ahead[0] == snapshots:
        pages, started = ahead[1], None
    else:
        try:
            pages = finished_pages(snapshots, repro)
        except ClaimError as error:
            explained = (explain(error, item.previous, item.fresh) for item in placed)
            raise next((e for e in explained if e is not error), error) from None
    files = {out / name: text for name, text in site(pages, repro).items()}
    writes = [(item.path, snap.dumps(item.fresh)) for item in placed if item.written]
    written = False
    try:
        with signals_held():
            remove_leftovers([out, *(path.parent for path, _ in snapshots)], say)
            snap.write_all([*writes, *files.items()])  # all or nothing, even on OSError
            written = True
            _report(placed, files, snapshots, started, say)
    except KeyboardInterrupt:
        raise Stopped(EXIT_INTERRUPTED, "interrupted", written=written) from None
    except Stopped as stop:
        raise Stopped(stop.exit_code, stop.how, written=written) from None


def _report(placed, files, snapshots, started, say):
    """Say what was written, the drift, which snapshot the page leads with, and its prose;
    `started` is when the page's render began, None for a page rendered ahead."""
    from .render import page_stats

    for item in placed:
        if item.same_records:
            say(
                f"wrote {item.path}: the same records, made again by changed capture code "
                f"({reuse.CODE_NAMED}), which it now names"
            )
            continue
        say(f"wrote {item.path}" if item.written else f"unchanged: {item.path}")
        if item.written and item.previous is not None:
            report = drift.report(
                item.previous[1], item.fresh, item.previous[0].name, item.path.name
            )
            say(report.rstrip("\n"))
    *pages, (tool, source) = files.items()
    (page, html), *others = pages
    size = len(html.encode("utf-8"))
    if started is None:
        say(f"wrote {page} ({size:,} bytes), rendered while torch was imported")
    else:
        say(f"wrote {page} ({size:,} bytes) in {time.perf_counter() - started:.2f} s")
    for other, text in others:
        say(f"wrote {other} ({len(text.encode('utf-8')):,} bytes), the framework loops")
    say(f"wrote {tool} ({len(source.encode('utf-8')):,} bytes), {manifest.DIAGNOSER} as it is")
    lead, newest = snapshots[-1]
    say(f"page leads with torch {newest.environment.torch} ({_shown(lead)})")
    stats = page_stats(html)
    say(
        f"prose: {stats.words:,} words (target under 1,600); "
        f"full message shown {stats.messages} times (target at most 2)"
    )
