"""The command line: capture, render, check."""

import argparse
import difflib
import json
import signal
import sys
import time
from pathlib import Path

from . import drift, manifest
from . import snapshot as snap
from .errors import (
    EXIT_CODES,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    REWRITE,
    BuildError,
    CheckError,
    ClaimError,
    OutputError,
    Stopped,
)

ROOT = Path(__file__).resolve().parent.parent


def parse_args(argv):
    """Read the command line."""
    codes = "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())
    parser = argparse.ArgumentParser(
        prog="build.py",
        description="Capture the torch scenarios in repro/ into snapshots/, then render site/index.html.",
        epilog=f"exit codes:\n{codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--render-only", action="store_true", help="render from the snapshots; never imports torch"
    )
    mode.add_argument(
        "--check",
        action="store_true",
        help="capture, compare with the committed snapshot, print a diff; writes nothing",
    )
    parser.add_argument(
        "--snapshots",
        type=Path,
        default=ROOT / "snapshots",
        metavar="DIR",
        help="snapshot folder (default: snapshots/)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "site",
        metavar="DIR",
        help="output folder for index.html (default: site/)",
    )
    parser.add_argument(
        "--repro", type=Path, default=ROOT / "repro", metavar="DIR", help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="capture with this interpreter (for example a venv with another torch)",
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    return parser.parse_args(argv)


def json_diff(old, new, old_name, new_name):
    """Return a unified diff of two snapshots' comparable JSON."""

    def lines(data):
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False).splitlines(
            keepends=True
        )

    return "".join(difflib.unified_diff(lines(old), lines(new), old_name, new_name))


def check(args, say):
    """Capture and compare with the committed snapshot; raise CheckError on any difference."""
    from .capture import capture
    from .render import render_page

    repro = manifest.load(args.repro)
    fresh = capture(repro, args.python, say)
    path = args.snapshots / snap.file_name(fresh.environment.torch)
    committed = snap.load(path)
    diff = json_diff(committed.comparable(), fresh.comparable(), str(path), "fresh capture")
    if diff:
        sys.stdout.write(diff)
        sys.stdout.write(drift.report(committed, fresh, path.name, "the fresh capture"))
        raise CheckError(
            path,
            "differs from a fresh capture (diff above); run `python build.py` to update it and commit the result",
        )
    render_page(snap.load_dir(args.snapshots), repro)
    say(f"{path} matches a fresh capture; the page renders")


def check_out(out):
    """Stop before any work if --out cannot be the page's folder."""
    for folder in (out, *out.parents):
        if folder.exists():
            if not folder.is_dir():
                raise OutputError(
                    folder, "is a file, not a folder; give --out a folder for index.html"
                )
            return


def explain(error, previous, fresh):
    """Name the capture change behind a claim that no longer holds first, then the sentence."""
    changes = drift.changes(previous[1], fresh) if previous is not None else []
    if not changes:
        return error
    # A change line reads "scenario <id>: ..." or "loop <key>: ..."; prefer one the check names.
    named = [line for line in changes if f"'{line.split(':')[0].split()[-1]}'" in error.reason]
    change = (named or changes)[0]
    (kind, ident), what = change.split(":")[0].split(), change.split(": ", 1)[1]
    file = Path("repro") / (f"{ident}.py" if kind == "scenario" else manifest.LOOP_BUILDER)
    return ClaimError(
        file,
        f"{kind} {ident} changed since {previous[0].name} ({what}), so {error.check}",
        error.reason,
        error.sentence,
        f"fix {file}, or if torch really behaves so now, {REWRITE}",
    )


def capture_into(args, repro, say):
    """Capture, and return (snapshots to render, the snapshot file to write or None, previous).

    Nothing is written here: a newer-schema snapshot stops the build, a corrupt one of the same
    torch is replaced (with a notice), and an unchanged capture keeps the file and its date.
    """
    from .capture import capture

    fresh = capture(repro, args.python, say)
    path = args.snapshots / snap.file_name(fresh.environment.torch)
    current, notice = snap.load_replaceable(path)
    if notice:
        say(notice)
    others = snap.load_dir(args.snapshots, skip=path, allow_empty=True)
    unchanged = current is not None and current.comparable() == fresh.comparable()
    chosen = current if unchanged else fresh
    snapshots = sorted(
        [*others, (path, chosen)], key=lambda item: snap.version_key(item[1].environment.torch)
    )
    previous = (path, current) if current is not None else (others[-1] if others else None)
    return snapshots, (None if unchanged else path), previous, fresh


def build(args, say):
    """Capture unless --render-only, then render; write the snapshot and the page, or neither."""
    from .render import render_page

    check_out(args.out)
    repro = manifest.load(args.repro)
    writes, path, previous = [], None, None
    if args.render_only:
        snapshots = snap.load_dir(args.snapshots)
    else:
        snapshots, path, previous, fresh = capture_into(args, repro, say)
    started = time.perf_counter()
    try:
        html = render_page(snapshots, repro)
    except ClaimError as error:
        raise (error if args.render_only else explain(error, previous, fresh)) from None
    if path is not None:
        writes.append((path, snap.dumps(fresh)))
    out = args.out / "index.html"
    snap.write_all([*writes, (out, html)])
    if not args.render_only:
        target = snapshots[-1][0] if path is None else path
        say(f"wrote {path}" if path is not None else f"unchanged: {target}")
        if path is not None and previous is not None:
            say(drift.report(previous[1], fresh, previous[0].name, path.name).rstrip("\n"))
    size = len(html.encode("utf-8"))
    say(f"wrote {out} ({size:,} bytes) in {time.perf_counter() - started:.2f} s")


def _terminated(signum, frame):
    raise Stopped(EXIT_TERMINATED, "terminated")


def main(argv=None):
    """Run the build; return the exit code."""
    args = parse_args(argv)
    say = (lambda message: None) if args.quiet else (lambda message: print(message, flush=True))
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        if args.check:
            check(args, say)
        else:
            build(args, say)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(
            "error: interrupted; the capture was stopped and nothing was written", file=sys.stderr
        )
        return EXIT_INTERRUPTED
    except Stopped as stop:
        print(
            f"error: {stop.how}; the capture was stopped and nothing was written", file=sys.stderr
        )
        return stop.exit_code
    finally:
        signal.signal(signal.SIGTERM, previous)
    return EXIT_OK
