"""Recreate the capture environments and recapture every kept torch version, then render.

The kept versions are those of snapshots/torch-X.Y.Z.json plus the capture pin in
pyproject.toml. Each is captured by its own virtual environment, ENVS/torch-X.Y.Z, made with
`python -m venv` and exactly `torch==X.Y.Z` and a numpy that torch accepts. Existing ones are
reused once their torch is checked; the interpreter running this serves its own torch version.
Nothing is written to snapshots/ or the page until every version has been captured and the page
renders.
"""

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import manifest
from . import snapshot as snap
from .errors import CaptureError, InputError, InstallError
from .publish import publish

DEFAULT_ENVS = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "backtwice" / "envs"
)
# Measured on 2026-11-30 (Linux x86_64, Python 3.11): torch 2.0.1+cu117 4.4 GB, 2.8.0+cu128
# 6.5 GB, 2.14.1+cu130 5.5 GB installed, each 1 to 2 minutes from the package index.
SIZE = "4.4 to 6.5 GB"
SPACE_GB = 7
PROBE_TIMEOUT = 180.0
NAME = re.compile(r"torch-(\d+\.\d+\.\d+)\.json")
PIN = re.compile(r"torch==(\d+\.\d+\.\d+)")
# torch before 2.3 was built against numpy 1 and warns at import under numpy 2.
NUMPY_1, NUMPY_2 = "numpy==1.26.4", "numpy==2.4.6"
# A venv without torch (a bare one) is installed into, not refused: find torch before numpy.
PROBE = (
    "import importlib.util, sys\n"
    "if importlib.util.find_spec('torch') is None:\n"
    "    sys.exit(print('no torch'))\n"
    "import numpy, torch\n"
    "print(torch.__version__)"
)


@dataclass(frozen=True)
class Env:
    """Where one kept torch version is captured."""

    version: str
    """The torch version, e.g. '2.8.0'."""
    python: Path
    """The interpreter that captures it."""
    action: str
    """'reuse', 'this' (the running interpreter), 'create', or 'install' (a venv without torch)."""


def pinned_torch(pyproject):
    """The torch version of the capture extra in pyproject.toml."""
    try:
        data = tomllib.loads(Path(pyproject).read_text(encoding="utf-8"))
        extra = data["project"]["optional-dependencies"]["capture"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise InputError(
            pyproject, f"has no capture extra to read the torch pin from ({exc})"
        ) from None
    for requirement in extra:
        found = PIN.fullmatch(requirement.replace(" ", ""))
        if found:
            return found.group(1)
    raise InputError(pyproject, "the capture extra pins no torch==X.Y.Z; pin one")


def kept_versions(snapshots, pin, added=()):
    """The versions to capture: snapshots/torch-X.Y.Z.json's, the pin and `added`, oldest first."""
    versions = {pin, *added}
    for path in sorted(Path(snapshots).glob("torch-*.json")):
        found = NAME.fullmatch(path.name)
        if found is None:
            raise InputError(path, "is not named torch-X.Y.Z.json; rename or remove it")
        versions.add(found.group(1))
    return sorted(versions, key=snap.version_key)


def requirements(version):
    """What pip installs for a torch version: exactly that torch and a numpy it accepts."""
    return [f"torch=={version}", NUMPY_1 if snap.version_key(version) < (2, 3) else NUMPY_2]


def probe(python):
    """The torch version an interpreter imports cleanly, or None when it has no torch."""
    try:
        done = subprocess.run(
            [str(python), "-W", "error", "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(python, f"cannot be run ({exc}); remove its environment") from None
    if done.returncode == 0:
        found = done.stdout.strip()
        return None if found == "no torch" else found.split("+")[0]
    last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    if "No module named 'torch'" in last:
        return None
    raise InputError(
        python, f"does not import torch and numpy cleanly ({last}); remove its environment"
    )


def this_torch():
    """The public torch version the running interpreter has installed, or None."""
    try:
        return importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return None


def plan(versions, envs):
    """Decide for each version which interpreter captures it; install nothing."""
    planned = []
    for version in versions:
        folder = Path(envs) / f"torch-{version}"
        python = folder / "bin" / "python"
        if python.exists():
            found = probe(python)
            if found is not None and found != version:
                raise InputError(
                    folder,
                    f"holds torch {found}, not {version}; remove it or choose another --envs folder; nothing was written",
                )
            planned.append(Env(version, python, "reuse" if found else "install"))
        elif folder.exists():
            raise InputError(
                folder,
                "is not a virtual environment (no bin/python); remove it; nothing was written",
            )
        elif this_torch() == version:
            planned.append(Env(version, Path(sys.executable), "this"))
        else:
            planned.append(Env(version, python, "create"))
    return planned


def describe(planned, envs):
    """The plan as lines: the versions, what each uses, and how much will be installed."""
    lines = [
        f"recapture {len(planned)} torch versions (snapshots/, the capture pin, those named): "
        + ", ".join(env.version for env in planned)
    ]
    for env in planned:
        folder = env.python.parent.parent
        pins = " ".join(requirements(env.version))
        lines.append(
            f"  torch {env.version}: "
            + {
                "reuse": f"reuse {folder}",
                "this": f"this interpreter, {env.python}",
                "create": f"create {folder} with pip install {pins}",
                "install": f"pip install {pins} into {folder}",
            }[env.action]
        )
    count = sum(env.action in ("create", "install") for env in planned)
    if count:
        lines.append(
            f"will install {count} environment{'s' if count > 1 else ''} under {envs}: CUDA builds "
            f"of torch, {SIZE} each and 1 to 2 minutes each from the package index; they run on the CPU"
        )
    else:
        lines.append("will install nothing")
    return lines


def check_space(planned, envs, free=None):
    """Stop before installing when the envs folder's disk cannot hold the plan."""
    count = sum(env.action in ("create", "install") for env in planned)
    if not count:
        return
    if free is None:
        existing = Path(envs)
        while not existing.exists():
            existing = existing.parent
        free = shutil.disk_usage(existing).free
    needed = count * SPACE_GB * 2**30
    if free < needed:
        raise InstallError(
            envs,
            f"has {free / 2**30:.1f} GB free but {count} environments need up to {needed / 2**30:.0f} GB; "
            "free space or choose another --envs folder; nothing was installed",
        )


def install(env, say):
    """Create the environment if needed and pip install its pins; remove it again on failure."""
    folder = env.python.parent.parent
    pins = requirements(env.version)
    say(f"installing {' '.join(pins)} into {folder}")
    try:
        if env.action == "create":
            folder.parent.mkdir(parents=True, exist_ok=True)
            _run([sys.executable, "-m", "venv", str(folder)], folder, "python -m venv")
        _run([str(env.python), "-m", "pip", "install", "--quiet", *pins], folder, "pip install")
        found = probe(env.python)
        if found != env.version:
            raise InstallError(folder, f"pip installed torch {found}, not {env.version}")
    except BaseException:
        if env.action == "create":
            shutil.rmtree(folder, ignore_errors=True)
        raise


def _run(command, folder, what):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        last = lines[-1].strip() if lines else f"exit code {done.returncode}"
        raise InstallError(folder, f"{what} failed ({last}); nothing was written")


def check_envs(envs):
    """Stop before planning if --envs or a folder above it is a file."""
    for folder in (Path(envs), *Path(envs).parents):
        if folder.exists():
            if not folder.is_dir():
                raise InputError(
                    folder,
                    "is a file, not a folder; give --envs a folder for the capture "
                    "environments; nothing was written",
                )
            return


def recapture(added, snapshots, repro, out, envs, pyproject, say, dry_run=False):
    """Make or reuse an environment per kept version (and `added`), capture each, then write
    the snapshots and render the page."""
    from .capture import capture

    repro = manifest.load(repro)
    check_envs(envs)
    planned = plan(kept_versions(snapshots, pinned_torch(pyproject), added), envs)
    for line in describe(planned, envs):
        say(line)
    if dry_run:
        return
    check_space(planned, envs)
    for env in planned:
        if env.action in ("create", "install"):
            install(env, say)
    fresh = []
    for env in planned:
        say(f"capturing torch {env.version} with {env.python}")
        captured = capture(repro, str(env.python), say)
        if captured.environment.torch != env.version:
            raise CaptureError(
                env.python,
                f"captured torch {captured.environment.torch}, not {env.version}; nothing was written",
            )
        fresh.append(captured)
    rendered, placed = snap.combine(fresh, snapshots, say)
    publish(rendered, placed, repro, Path(out), say)
