"""The one error type of the build, and the exit code of each kind of failure."""

import contextlib
from pathlib import Path

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INPUT = 3  # a snapshot or manifest is missing, corrupt, of an unknown schema, or stale
EXIT_CAPTURE = 4  # a scenario hung, crashed, or did not raise / run as declared
EXIT_CHECK = 5  # --check found a difference between a fresh capture and the committed snapshot
EXIT_CLAIM = 6  # a sentence on the page no longer holds for the snapshot
EXIT_INSTALL = 7  # --recapture could not make a capture environment

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_USAGE: "bad command line",
    EXIT_INPUT: "a snapshot or repro/scenarios.toml is missing, corrupt, unknown or stale",
    EXIT_CAPTURE: "a scenario hung, crashed, or did not behave as repro/scenarios.toml declares",
    EXIT_CHECK: "--check: the fresh capture differs from the committed snapshot",
    EXIT_CLAIM: "a claim on the page is false for the snapshot",
    EXIT_INSTALL: "--recapture could not make a capture environment",
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


class ClaimError(BuildError):
    """A sentence on the page is false for the snapshot it is rendered from."""

    exit_code = EXIT_CLAIM


class InstallError(BuildError):
    """A capture environment could not be made: no space, or venv or pip failed."""

    exit_code = EXIT_INSTALL
