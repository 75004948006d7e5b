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

SCHEMA = 1
RECAPTURE = "run `python build.py` with torch installed to capture it again"


@dataclass(frozen=True)
class Environment:
    """Where the capture ran."""

    torch: str
    """torch.__version__ of the capturing interpreter."""
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
class Grad:
    """One parameter's gradient when its optimizer stepped."""

    name: str
    """The parameter, as the loop names it: 'encoder.weight'."""
    norm: float | None
    """The gradient's norm to 6 significant digits, or None when it had no gradient."""


@dataclass(frozen=True)
class Step:
    """One completed step of a checker loop, measured in a second, instrumented run."""

    step: int
    """The step number, from 1."""
    depths: tuple[int, ...]
    """Graph depth of the root of each backward or autograd.grad call in the step, in order."""
    saved: int
    """Saved tensors still readable in the graphs the loop's variables reach, at the step's end."""
    grads: tuple[Grad, ...]
    """Every optimizer parameter's gradient as the optimizer stepped, sorted by name."""


@dataclass(frozen=True)
class FixedRun:
    """A fixed loop (repro/loop.py fix() or tempting()), run and measured."""

    key: str
    """Its key: 'fixed-...' or 'tempting-...' (see repro/loop.py)."""
    source: str
    """Its source, exactly as it ran."""
    raised: Raised | None
    """The exception, or None when all steps ran (the capture stops if a fix raises)."""
    steps: tuple[Step, ...]
    """The steps that completed."""


@dataclass(frozen=True)
class LoopRun:
    """One of the checker's loops, built from four answers by repro/loop.py and run.

    The verdict, step and text come from a plain run of the source; the steps' figures from a
    second run that measures; the capture stops unless both runs raised alike.
    """

    when: str
    """When the error appears: 'first', 'later' or 'saved' (reading a saved tensor)."""
    calls: str
    """The step's backward calls: 'one', 'twice', 'shared', 'gan' or 'grad'."""
    reach: str
    """What reaches into an earlier step: 'nothing', 'rnn', 'lstm', 'before', 'total', 'kept'."""
    retain: str
    """What the first call adds: 'none', 'retain' (retain_graph=True) or 'create'."""
    source: str
    """The loop's source, exactly as it ran."""
    raised: Raised | None
    """The exception of the plain run, or None when all steps ran."""
    anomaly: Anomaly | None
    """What anomaly mode named, when it raised."""
    raised_step: int | None
    """The step during which it raised."""
    steps: tuple[Step, ...]
    """The steps that completed, as measured."""
    fix: FixedRun
    """The fixed loop and what it did."""
    tempting: FixedRun | None
    """A fix people try that runs but trains something else (repro/loop.py tempting()), or None."""


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
        """Return the snapshot as JSON data without what may vary between equal captures."""
        data = to_data(self)
        del data["environment"]["captured"]
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
    """Name the snapshot of a torch version: torch-2.13.0.json for '2.13.0+cpu'."""
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
