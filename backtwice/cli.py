"""The command line: capture, render, check."""

import argparse
import difflib
import json
import sys
import time
from pathlib import Path

from . import drift
from . import snapshot as snap
from .errors import EXIT_CODES, EXIT_OK, BuildError, CheckError

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

    fresh = capture(args.repro, args.python, say)
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
    render_page(snap.load_dir(args.snapshots), args.repro)
    say(f"{path} matches a fresh capture; the page renders")


def build(args, say):
    """Capture unless --render-only, then render the page."""
    from .render import page_stats, render_page

    if not args.render_only:
        from .capture import capture

        fresh = capture(args.repro, args.python, say)
        previous = snap.previous_of(fresh, args.snapshots)
        path, written = snap.save(fresh, args.snapshots, previous)
        say(f"{'wrote' if written else 'unchanged:'} {path}")
        if written and previous is not None:
            say(drift.report(previous[1], fresh, previous[0].name, path.name).rstrip("\n"))
    started = time.perf_counter()
    html = render_page(snap.load_dir(args.snapshots), args.repro)
    out = args.out / "index.html"
    snap.write_atomic(out, html)
    size = len(html.encode("utf-8"))
    say(f"wrote {out} ({size:,} bytes) in {time.perf_counter() - started:.2f} s")
    stats = page_stats(html)
    say(
        f"prose: {stats.words:,} words (target under 1,600); full message shown {stats.messages} times (target at most 2)"
    )


def main(argv=None):
    """Run the build; return the exit code."""
    args = parse_args(argv)
    say = (lambda message: None) if args.quiet else (lambda message: print(message, flush=True))
    try:
        if args.check:
            check(args, say)
        else:
            build(args, say)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return EXIT_OK
