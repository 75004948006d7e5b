"""The snapshot: what one capture recorded, as frozen dataclasses and deterministic JSON."""

import dataclasses
import json
import os
import tempfile
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError

SCHEMA = 2
RECAPTURE = "run `python build.py` with torch installed to capture it again"


@dataclass(frozen=True)
class Environment:
    """Where the capture ran."""

    torch: str
    """torch's public version, e.g. '2.8.0': torch.__version__ without its build tag."""
    build: str
    """torch's build tag, e.g. 'cu128' or 'cpu' ('' for none); not compared between captures."""
    python: str
    """Python version of the capturing interpreter."""
    platform: str
    """Operating system and machine, e.g. 'Linux x86_64'."""
    device: str
    """'cpu', or the CUDA device's name when one was available."""
    cuda: bool
    """Whether torch.cuda.is_available() was true."""
    captured: str
    """The UTC date of the capture; kept when a recapture changes nothing."""


@dataclass(frozen=True)
class Raised:
    """An exception a scenario raised, as recorded."""

    type: str
    """The exception's class name, e.g. 'RuntimeError'."""
    message: str
    """str(exception), exactly."""
    line: int | None
    """The line of the scenario's source that raised, from the traceback."""
    code: str | None
    """That line's text, stripped."""


@dataclass(frozen=True)
class Anomaly:
    """What torch.autograd.set_detect_anomaly(True) named when the scenario raised."""

    node: str
    """The backward node that failed, e.g. 'MulBackward0'."""
    line: int | None
    """The scenario line whose forward call created that node."""
    code: str | None
    """That line's text, stripped."""


@dataclass(frozen=True)
class Output:
    """One print() call a scenario made."""

    line: int | None
    """The scenario line of the print() call."""
    text: str
    """What print() would have written, without the newline."""
    values: tuple[Any, ...]
    """The printed arguments as JSON: tensors as {'tensor': nested list, 'dtype': name}."""


@dataclass(frozen=True)
class ScenarioRun:
    """What one scenario of repro/scenarios.toml did."""

    expect: str
    """What the manifest declared: 'raises' or 'runs'."""
    raised: Raised | None
    """The exception, or None when it ran to the end."""
    anomaly: Anomaly | None
    """What anomaly mode named, when it raised and anomaly mode named anything."""
    outputs: tuple[Output, ...]
    """Its print() calls, in order."""


@dataclass(frozen=True)
class Step:
    """One completed step of a checker loop."""

    step: int
    """The step number, from 1."""
    depth: int
    """Graph depth of the step's loss (see repro/support.py)."""
    grad: float
    """w.grad after the step's backward calls, rounded to 6 decimals."""
    saved: int
    """Saved tensors the graph still held after the step."""


@dataclass(frozen=True)
class LoopRun:
    """One of the checker's 16 loops, built by repro/loop.py and run."""

    calls: int
    """Backward calls per step: 1 or 2."""
    retain: bool
    """Whether the first call passes retain_graph=True."""
    carried: bool
    """Whether state is carried across steps without detach."""
    summed: bool
    """Whether the losses are summed before backward."""
    source: str
    """The loop's source, exactly as it ran."""
    raised: Raised | None
    """The exception, or None when all steps ran."""
    anomaly: Anomaly | None
    """What anomaly mode named, when it raised."""
    raised_step: int | None
    """The step during which it raised."""
    raised_call: int | None
    """Which backward call of that step raised: 1 or 2."""
    steps: tuple[Step, ...]
    """The steps that completed."""
    fix: str
    """The key of the loop repro/loop.py recommends instead (its own key when it is the fix)."""


@dataclass(frozen=True)
class Snapshot:
    """Everything one capture recorded."""

    schema: int
    """The snapshot format's version: SCHEMA."""
    environment: Environment
    """Where it ran."""
    sources: dict[str, str]
    """sha256 of each repro/ file the capture ran, by file name, to detect a stale snapshot."""
    scenarios: dict[str, ScenarioRun]
    """Each scenario's run, by id."""
    loops: dict[str, LoopRun]
    """Each checker loop's run, by key (see repro/loop.py Answers.key)."""

    def comparable(self):
        """Return the snapshot as JSON data without what may vary between equal captures.

        The date, and the build tag: a CUDA wheel and a CPU wheel of one torch version run these
        CPU scenarios alike, and which one a machine can install is not the reader's business.
        """
        data = to_data(self)
        del data["environment"]["captured"]
        del data["environment"]["build"]
        return data


def to_data(value):
    """Turn a dataclass tree into plain JSON data."""
    return json.loads(json.dumps(dataclasses.asdict(value)))


def dumps(snapshot):
    """Serialise deterministically: sorted keys, two-space indent, UTF-8, final newline."""
    return json.dumps(to_data(snapshot), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def _load(kind, data, where):
    """Build `kind` from JSON data, naming the field path of anything wrong."""
    if kind is Any:
        return data
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(kind)
        if data is None and type(None) in options:
            return None
        (inner,) = [option for option in options if option is not type(None)]
        return _load(inner, data, where)
    if dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise ValueError(f"field '{where}' should be an object")
        hints = typing.get_type_hints(kind)
        values = {}
        for field in dataclasses.fields(kind):
            path = f"{where}.{field.name}" if where else field.name
            if field.name not in data:
                raise ValueError(f"field '{path}' is missing")
            values[field.name] = _load(hints[field.name], data[field.name], path)
        return kind(**values)
    if origin is tuple:
        if not isinstance(data, list):
            raise ValueError(f"field '{where}' should be a list")
        inner = typing.get_args(kind)[0]
        return tuple(_load(inner, item, f"{where}[{i}]") for i, item in enumerate(data))
    if origin is dict:
        if not isinstance(data, dict):
            raise ValueError(f"field '{where}' should be an object")
        inner = typing.get_args(kind)[1]
        return {key: _load(inner, item, f"{where}.{key}") for key, item in data.items()}
    expected = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}[kind]
    if not isinstance(data, expected) or (kind is int and isinstance(data, bool)):
        raise ValueError(f"field '{where}' should be of type {kind.__name__}")
    return data


def parse(text, path):
    """Read a snapshot from its JSON text; `path` names it in errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"is not valid JSON ({exc.msg}); {RECAPTURE}", exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError(path, f"is not a JSON object; {RECAPTURE}")
    if data.get("schema") != SCHEMA:
        raise InputError(
            path,
            f"field 'schema' is {data.get('schema')!r} but this build reads schema {SCHEMA}; "
            f"{RECAPTURE}",
        )
    try:
        return _load(Snapshot, data, "")
    except ValueError as exc:
        raise InputError(path, f"{exc}; {RECAPTURE}") from None


def load(path):
    """Read and validate one snapshot file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, f"no such snapshot; {RECAPTURE}") from None
    except UnicodeDecodeError:
        raise InputError(path, f"is not UTF-8 text; {RECAPTURE}") from None
    return parse(text, path)


def file_name(torch_version):
    """Name the snapshot of a torch version: torch-2.13.0.json for '2.13.0' (or '2.13.0+cpu')."""
    return f"torch-{torch_version.split('+')[0]}.json"


def load_dir(directory):
    """Read every snapshot in a folder, oldest torch first."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(directory, f"no such snapshot folder; {RECAPTURE}")
    paths = sorted(directory.glob("torch-*.json"))
    if not paths:
        raise InputError(directory, f"holds no torch-*.json snapshot; {RECAPTURE}")
    snapshots = [(path, load(path)) for path in paths]
    snapshots.sort(key=lambda item: version_key(item[1].environment.torch))
    return snapshots


def version_key(version):
    """Order torch versions numerically: '2.9.1' before '2.13.0'."""
    parts = []
    for part in version.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def write_atomic(path, text):
    """Write text to path through a temporary file and a rename, so no half file is left."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def previous_of(snapshot, directory):
    """The snapshot a fresh capture is compared with: the same torch's, else the newest other.

    Returns (path, Snapshot) or None. An unreadable file of the same torch counts as absent,
    since the capture is about to replace it.
    """
    directory = Path(directory)
    path = directory / file_name(snapshot.environment.torch)
    if path.exists():
        try:
            return path, load(path)
        except InputError:
            return None
    others = []
    for other in sorted(directory.glob("torch-*.json")):
        try:
            others.append((other, load(other)))
        except InputError:
            continue
    others.sort(key=lambda item: version_key(item[1].environment.torch))
    return others[-1] if others else None


def save(snapshot, directory, previous):
    """Write the snapshot unless `previous` (from previous_of) is the same torch's and equal.

    Returns (path, written).
    """
    path = Path(directory) / file_name(snapshot.environment.torch)
    if (
        previous is not None
        and previous[0] == path
        and previous[1].comparable() == snapshot.comparable()
    ):
        return path, False
    write_atomic(path, dumps(snapshot))
    return path, True
