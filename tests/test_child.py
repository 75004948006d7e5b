"""The capture interpreter's head start: started before the build reads repro/, sent its
request without the build waiting on it, and stopped however the build ends."""

import subprocess
import sys
import time

from backtwice import child, cli, manifest
from backtwice.errors import EXIT_INPUT, InputError

from .conftest import ROOT, alive


def sleeper(tmp_path, seconds):
    """An 'interpreter' that reads nothing for a while, as the harness does while it imports
    torch, and notes its pid."""
    script = tmp_path / "slow-python"
    script.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\nexec sleep {seconds}\n")
    script.chmod(0o755)
    return script


def test_the_interpreter_starts_before_the_build_reads_repro(tmp_path, monkeypatch):
    events = []
    started, load = child.Child.__init__, manifest.load

    def noting_start(self, *args, **kwargs):
        events.append("interpreter started")
        started(self, *args, **kwargs)

    def noting_load(*args, **kwargs):
        events.append("repro/ read")
        return load(*args, **kwargs)

    monkeypatch.setattr(child.Child, "__init__", noting_start)
    monkeypatch.setattr(manifest, "load", noting_load)
    # /bin/false starts and ends at once: the build gets as far as sending it the request.
    code = cli.main(["--python", "/bin/false", "--out", str(tmp_path / "site"), "--quiet"])
    assert code != 0
    assert events[:2] == ["interpreter started", "repro/ read"]


def test_a_request_larger_than_a_pipe_does_not_hold_the_build(tmp_path):
    # The harness reads its request only once torch is imported; the build goes on meanwhile
    # (it reads the snapshots), and stops the interpreter at once if it must.
    interpreter = child.Child(str(sleeper(tmp_path, 60)))
    request = {"jobs": [{"id": "x", "file": "x.py", "source": "#" * (1 << 20)}]}
    began = time.monotonic()
    interpreter.send(request)
    sent = time.monotonic() - began
    interpreter.close()
    closed = time.monotonic() - began
    assert sent < 0.5, f"sending took {sent:.2f} s: the build waited for the interpreter"
    assert closed < 5, f"closing took {closed:.2f} s"
    assert not alive(int((tmp_path / "pid").read_text()))


def test_an_interpreter_that_cannot_start_is_reported_after_the_builds_own_checks(tmp_path):
    # Started first, it still speaks last: an --out that is a file is the first thing wrong.
    out = tmp_path / "site"
    out.write_text("a file")
    missing = tmp_path / "no-such-python"
    result = subprocess.run(
        [sys.executable, "build.py", "--python", str(missing), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert result.stderr.splitlines() == [
        f"error: {out}: is a file, not a folder; give --out a folder for index.html"
    ]
    interpreter = child.Child(str(missing))
    try:
        try:
            interpreter.send({})
        except InputError as exc:
            assert exc.exit_code == EXIT_INPUT
            assert str(exc).startswith(f"{missing}: cannot be run (No such file or directory)")
        else:
            raise AssertionError("send() did not raise")
    finally:
        interpreter.close()
        interpreter.close()  # once is enough: again is nothing
