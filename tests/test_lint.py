"""ruff, as configured in pyproject.toml, passes on the whole tree."""

import subprocess
import sys

import pytest

from .conftest import ROOT


@pytest.mark.parametrize("command", [["check", "."], ["format", "--check", "."]])
def test_ruff(command):
    # `python -m ruff` finds the ruff installed with the test extra even when the virtual
    # environment's bin/ is not on PATH.
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
