"""The capture interpreter as the build sees it: start it, send it a request, read its messages,
stop it.

It is started before the build has read repro/ or imported most of itself: the interpreter
then imports torch (a second or more) while the build reads what it will ask for, and reads
the request once torch is imported. This module imports only the standard library for that
reason.
"""

import contextlib
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from .errors import CaptureError, InputError

HARNESS = Path(__file__).with_name("harness.py")


class Child:
    """The capture interpreter: a fork server that runs each job in a fresh fork.

    Its messages come over a pipe of their own, so a banner or anything else the interpreter
    prints goes to its stderr file and cannot be mistaken for one. It runs in a session of its
    own, so that a Ctrl-C in the terminal reaches only the build, which then stops it; stopped
    with SIGTERM, it kills every process its jobs started, detached ones included, and if the
    build dies it gets that SIGTERM from the kernel.

    An interpreter that cannot be started is not an error yet: send() raises it, so that what
    the build finds wrong before it would have started one (its output folder, repro/) is
    reported first, as it would be without the head start.
    """

    def __init__(self, python, harness=HARNESS):
        self.python = python
        self.stderr = tempfile.TemporaryFile()
        self.error = None
        self.proc = self.channel = self.reader = self.writer = None
        self.lines = queue.Queue()
        read, write = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [python, str(harness), str(write)],
                stdin=subprocess.PIPE,
                stdout=self.stderr,
                stderr=self.stderr,
                pass_fds=(write,),
                start_new_session=True,
            )
        except OSError as exc:
            os.close(read)
            self.error = InputError(
                python,
                f"cannot be run ({exc.strerror}); give --python a Python interpreter that has torch; nothing was written",
            )
            return
        finally:
            os.close(write)
        self.channel = os.fdopen(read, "rb")
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def send(self, request):
        """Send the request, the first line, from a thread of its own: the interpreter reads it
        only once torch is imported, and a request larger than the pipe holds would otherwise
        keep this process waiting until then."""
        if self.error is not None:
            raise self.error
        self.writer = threading.Thread(target=self._write, args=(request, False), daemon=True)
        self.writer.start()

    def _write(self, message, last):
        """Send the child one line on its stdin; close it after the last."""
        if self.proc.stdin.closed:
            return
        try:
            self.proc.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # it died, or was stopped: next() says how
            last = True
        if last:
            with contextlib.suppress(BrokenPipeError, ValueError):
                self.proc.stdin.close()

    def more(self, jobs):
        """Send the jobs chosen once the child is ready, its last message."""
        self.writer.join()  # it has read the request: it said it is ready
        self._write({"jobs": jobs}, last=True)

    def _read(self):
        for line in self.channel:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, timeout):
        """Return the next message, or None if the child ended; raise TimeoutError."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            return None
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            raise CaptureError(
                self.python,
                f"sent {line[:60]!r} where the capture harness speaks; give --python a Python "
                "interpreter that has torch; nothing was written",
            )
        return message

    def stop(self):
        """Stop the child and anything its jobs started, if it still runs; then close its
        stdin (a request it was still to read no longer holds the writer up once it ended)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)  # it kills its descendants, then exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # a wrapper's or a stuck child's leftovers
        self.proc.wait()
        with contextlib.suppress(BrokenPipeError, ValueError):
            self.proc.stdin.close()

    def close(self):
        """Stop the child and release its pipes and files; once is enough."""
        if self.stderr.closed:
            return
        if self.proc is not None:
            self.stop()
            self.reader.join(timeout=5)
            if self.writer is not None:
                self.writer.join(timeout=5)
            self.channel.close()
        self.stderr.close()

    def died(self):
        """Describe how the child ended: 'exited with code N' or 'was killed by signal N', and
        its last line on stderr in parentheses (or nothing)."""
        try:
            self.proc.wait(timeout=10)  # the channel closed: let it finish exiting before we look
        except subprocess.TimeoutExpired:
            self.stop()
        code = self.proc.returncode
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return how, quoted(last_line(self.stderr))


def last_line(handle):
    """The last non-blank line of a file, whatever its bytes."""
    handle.seek(0)
    lines = [line.strip() for line in handle.read().splitlines() if line.strip()]
    return lines[-1].decode("utf-8", "backslashreplace") if lines else ""


def quoted(line):
    """A line of a child's output for an error message: in parentheses, escaped, or nothing."""
    if not line:
        return ""
    return f" ({line.encode('unicode_escape').decode('ascii') if not line.isprintable() else line})"
