"""The one error type of the build, and the exit code of each kind of failure."""

import contextlib
from pathlib import Path

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INPUT = 3  # a snapshot or manifest is missing, corrupt, of an unknown schema, or stale
EXIT_CAPTURE = 4  # a scenario hung, crashed, or did not raise / run as declared
EXIT_CHECK = 5  # --check found a difference between a fresh capture and the committed snapshot
EXIT_CLAIM = 6  # a sentence on the page no longer holds for the snapshot
EXIT_OUTPUT = 7  # the snapshot or the page could not be written (permissions, disk full, a file)
EXIT_INSTALL = 8  # --recapture could not make a capture environment
EXIT_HUNG_UP = 129  # SIGHUP (the terminal closed): 128 + 1
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT): 128 + 2, as shells report it
EXIT_TERMINATED = 143  # SIGTERM: 128 + 15

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_USAGE: "bad command line",
    EXIT_INPUT: "a snapshot or repro/scenarios.toml is missing, corrupt, unknown or stale",
    EXIT_CAPTURE: "a scenario hung, crashed, or did not behave as repro/scenarios.toml declares",
    EXIT_CHECK: "--check: the fresh capture differs from the committed snapshot",
    EXIT_CLAIM: "a claim on the page is false for the snapshot, or the page leaves out a "
    "declared scenario or a printed line",
    EXIT_OUTPUT: "the snapshot or the page could not be written; nothing was changed",
    EXIT_INSTALL: "--recapture could not make a capture environment",
    EXIT_HUNG_UP: "hung up (SIGHUP); the capture was stopped and nothing was written",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C); the capture was stopped and nothing was written",
    EXIT_TERMINATED: "terminated (SIGTERM); the capture was stopped and nothing was written",
}


class BuildError(Exception):
    """A failure the user can fix, reported as `file(line): message`."""

    exit_code = EXIT_INPUT

    def __init__(self, file, message, line=None):
        super().__init__(message)
        self.file = file
        self.line = line
        self.message = message

    def __str__(self):
        place = str(self.file)
        if isinstance(self.file, Path) and self.file.is_absolute():
            with contextlib.suppress(ValueError):
                place = str(self.file.relative_to(Path.cwd()))
        if self.line is not None:
            place += f"({self.line})"
        return f"{place}: {self.message}"


class InputError(BuildError):
    """A snapshot or manifest cannot be used as it is."""

    exit_code = EXIT_INPUT


class CaptureError(BuildError):
    """A scenario hung, crashed or behaved other than declared."""

    exit_code = EXIT_CAPTURE


class CheckError(BuildError):
    """A fresh capture differs from the committed snapshot."""

    exit_code = EXIT_CHECK


REWRITE = "rewrite that sentence in backtwice/claims.py"


class ClaimError(BuildError):
    """A sentence on the page is false for the snapshot it is rendered from."""

    exit_code = EXIT_CLAIM

    def __init__(self, file, check, reason, sentence, fix=REWRITE):
        super().__init__(file, f'{check} failed ({reason}); the page would say "{sentence}"; {fix}')
        self.check = check
        """Which check failed, e.g. "section 'cause-2': the check 'carried_raises_on_step_2'"."""
        self.reason = reason
        """Why it failed, e.g. "scenario 'c2_detach' now raises"."""
        self.sentence = sentence
        """The sentence, as plain text."""


class PageError(BuildError):
    """The rendered page leaves out something it must show: a declared scenario, a printed line."""

    exit_code = EXIT_CLAIM


class OutputError(BuildError):
    """The snapshot or the page could not be written."""

    exit_code = EXIT_OUTPUT


class Stopped(BaseException):
    """The build was interrupted or terminated by a signal; carries the exit code."""

    def __init__(self, exit_code, how, written=False):
        super().__init__(how)
        self.exit_code = exit_code
        self.how = how
        self.written = written
        """True when the signal came while the snapshot and the page were written, which was
        finished first."""


class InstallError(BuildError):
    """A capture environment could not be made: no space, or venv or pip failed."""

    exit_code = EXIT_INSTALL
