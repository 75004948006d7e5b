"""The command line: capture, render, check.

A build that captures starts the capture interpreter first (child.Child), before this process
has imported the rest of the build or read repro/: the interpreter imports torch meanwhile, on
another core. This module therefore imports only what that needs at its top, and the rest of
the build where it is used.
"""

import argparse
import contextlib
import os
import re
import signal
import sys
from pathlib import Path

from .errors import (
    EXIT_CODES,
    EXIT_HUNG_UP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    BuildError,
    CheckError,
    OutputError,
    Stopped,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ENVS = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "backtwice" / "envs"
)


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
    mode.add_argument(
        "--recapture",
        nargs="*",
        metavar="X.Y.Z",
        help="make or reuse a virtual environment per kept torch version (snapshots/, the "
        "capture pin, and any named here), capture each, then render; says first what it installs",
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
        help="output folder for index.html, frameworks.html and diagnose.py (default: site/)",
    )
    parser.add_argument(
        "--repro", type=Path, default=ROOT / "repro", metavar="DIR", help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="capture with this interpreter (for example a venv with another torch)",
    )
    parser.add_argument(
        "--envs",
        type=Path,
        default=DEFAULT_ENVS,
        metavar="DIR",
        help=f"with --recapture: folder of the environments (default: {DEFAULT_ENVS})",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="with --recapture: print the plan, do nothing"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    # For bench/speed.py: a build that runs every diagnoser case, as --check does, and writes.
    parser.add_argument("--every-case", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.recapture is not None and args.python:
        parser.error("--recapture chooses an interpreter per version; drop --python")
    for version in args.recapture or ():
        if not re.fullmatch(r"\d+\.\d+\.\d+", version):
            parser.error(f"--recapture: {version!r} is not a torch version like 2.9.1")
    if args.dry_run and args.recapture is None:
        parser.error("--dry-run goes with --recapture")
    return args


def json_diff(old, new, old_name, new_name):
    """Return a unified diff of two snapshots' comparable JSON."""
    import difflib
    import json

    def lines(data):
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False).splitlines(
            keepends=True
        )

    return "".join(difflib.unified_diff(lines(old), lines(new), old_name, new_name))


class Say:
    """Print progress lines on stdout; if stdout is closed early (`| head -1`), go on quietly."""

    def __init__(self, quiet):
        self.quiet = quiet
        self.broken = False

    def __call__(self, message, end="\n"):
        if self.quiet or self.broken:
            return
        try:
            sys.stdout.write(message + end)
            sys.stdout.flush()
        except BrokenPipeError:
            self.broken = True
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # nothing more to that pipe, at exit neither
            os.close(devnull)


def check(args, say, child):
    """Capture and compare with the committed snapshot; raise CheckError on any difference."""
    from . import drift, manifest
    from . import snapshot as snap
    from .capture import capture
    from .publish import finished_pages, site

    repro = manifest.load(args.repro)
    fresh = capture(
        repro,
        args.python,
        say,
        meanwhile=lambda: _read_ahead(args.snapshots, repro),
        child=child,
    )
    path = args.snapshots / snap.file_name(fresh.environment.torch)
    committed = snap.load(path)
    diff = json_diff(committed.comparable(), fresh.comparable(), str(path), "fresh capture")
    if diff:
        say.quiet = False  # the diff is the answer, even with --quiet
        say(diff, end="")
        say(drift.report(committed, fresh, path.name, "the fresh capture"), end="")
        raise CheckError(
            path,
            "differs from a fresh capture (diff above); run `python build.py` to update it and commit the result",
        )
    site(finished_pages(snap.load_dir(args.snapshots), repro), repro)  # what a build writes
    say(f"{path} matches a fresh capture; both pages render")


def _nearest(folder):
    """The folder itself if it exists, else its nearest existing parent."""
    return next(path for path in (folder, *folder.parents) if path.exists())


def check_out(out):
    """Stop before any work if --out cannot be the page's folder."""
    folder = _nearest(out)
    if not folder.is_dir():
        raise OutputError(folder, "is a file, not a folder; give --out a folder for index.html")


def check_writable(folder, option):
    """Stop before the capture, not minutes after it, where the build could not write its file
    into `folder` (made if missing, as the build would make it): a file is made and removed in
    it, or a folder in its nearest existing parent. A folder that is a file is left for the
    reading or writing to report."""
    import tempfile

    existing = _nearest(folder)
    if not existing.is_dir():
        return
    try:
        if existing == folder:
            tempfile.TemporaryFile(dir=folder).close()
        else:
            os.rmdir(tempfile.mkdtemp(dir=existing))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise OutputError(
            folder,
            f"cannot be written ({reason}); give {option} a folder you can write; nothing was captured",
        ) from None


def _read_ahead(folder, repro, ahead=None):
    """While the capture interpreter imports torch (a second or more, on another core): read
    the snapshots and, given a list `ahead`, render the pages from them as they are into it, as
    (snapshots, pages). A capture that leaves them as they are, as one does when nothing
    changed, has that page written (publish()). What goes wrong here is left for the build to
    find and report."""
    from . import render  # noqa: F401  # imported now rather than after the capture
    from . import snapshot as snap
    from .publish import finished_pages

    with contextlib.suppress(BuildError):
        snapshots = snap.load_dir(folder)
        if ahead is not None:
            ahead.append((snapshots, finished_pages(snapshots, repro)))


def build(args, say, child):
    """Capture unless --render-only, then render; write the snapshot and the page, or neither."""
    from . import manifest
    from . import snapshot as snap
    from .publish import publish

    check_out(args.out)
    repro = manifest.load(args.repro)
    if args.render_only:
        publish(snap.load_dir(args.snapshots), [], repro, args.out, say)
        return
    check_writable(args.snapshots, "--snapshots")
    check_writable(args.out, "--out")
    from .capture import capture

    ahead = []
    fresh = capture(
        repro,
        args.python,
        say,
        meanwhile=lambda: _read_ahead(args.snapshots, repro, ahead),
        reuse_from=None if args.every_case else args.snapshots,
        child=child,
    )
    snapshots, placed = snap.combine([fresh], args.snapshots, say)
    publish(snapshots, placed, repro, args.out, say, ahead[0] if ahead else None)


STOPPING = {
    signal.SIGTERM: (EXIT_TERMINATED, "terminated"),
    signal.SIGHUP: (EXIT_HUNG_UP, "hung up"),
}


def _stopped(signum, frame):
    raise Stopped(*STOPPING[signum])


def main(argv=None):
    """Run the build; return the exit code."""
    args = parse_args(argv)
    say = Say(args.quiet)
    previous = {signum: signal.signal(signum, _stopped) for signum in STOPPING}
    try:
        code = run(args, say)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if say.broken and code == EXIT_OK:
        print(
            "notice: stdout was closed before the build finished (broken pipe); "
            "the build went on to the end without printing",
            file=sys.stderr,
        )
    return code


def run(args, say):
    """Run the command the arguments name; return the exit code."""
    child = None
    try:
        if args.check or (args.recapture is None and not args.render_only):
            from .child import Child  # its imports are the first a capture makes; render needs none

            child = Child(args.python or sys.executable)
        if args.check:
            check(args, say, child)
        elif args.recapture is not None:
            from .recapture import recapture

            recapture(
                args.recapture,
                args.snapshots,
                args.repro,
                args.out,
                args.envs,
                ROOT / "pyproject.toml",
                say,
                args.dry_run,
            )
        else:
            build(args, say, child)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(
            "error: interrupted; the capture was stopped and nothing was written", file=sys.stderr
        )
        return EXIT_INTERRUPTED
    except Stopped as stop:
        if stop.written:
            print(
                f"error: {stop.how} while the build wrote its files; it finished writing them "
                "first, so the snapshot and the page are complete",
                file=sys.stderr,
            )
        else:
            print(
                f"error: {stop.how}; the capture was stopped and nothing was written",
                file=sys.stderr,
            )
        return stop.exit_code
    finally:
        if child is not None:
            child.close()  # the capture closed it, unless the build stopped before that
    return EXIT_OK
