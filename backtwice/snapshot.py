"""The snapshot: what one capture recorded, as frozen dataclasses and deterministic JSON."""

import dataclasses
import functools
import hashlib
import json
import os
import tempfile
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError, OutputError

SCHEMA = 6
RECAPTURE = "run `python build.py` with torch installed to capture it again"
NEWER = (
    "was written by a newer build of this project (schema {found}; this build reads schema "
    "{schema}); update this checkout, or capture into another folder with --snapshots"
)


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
    variables: str
    """sha256 of the environment variables the capture interpreter started with whose names
    torch, its kernels or CUDA read (harness.VARIABLES: TORCH*, MKL_*, ...); not compared
    between captures, but a build reuses a diagnoser case's record only under the same ones."""


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
class Place:
    """A line of a scenario that the diagnoser names."""

    line: int | None
    """1-based line in the scenario's file."""
    code: str | None
    """That line's text, stripped."""
    call: int | None
    """The backward / autograd.grad call's number in the run, where the line makes one."""


@dataclass(frozen=True)
class Traversal:
    """A second backward through nodes that saved nothing: no error, gradients added again."""

    first: Place
    """The call that went through them first."""
    second: Place
    """The call that went through them again."""


@dataclass(frozen=True)
class Diagnosis:
    """What backtwice/diagnose.py reported when the scenario ran under it."""

    cause: str | None
    """same-loss-twice, carried-state, shared-forward, saved-read, or None (no such error)."""
    raised: Place | None
    """The call that raised, or the line that read a freed saved tensor."""
    freed_by: Place | None
    """The earlier call that freed what the raising one needed."""
    retain_graph: bool | None
    """That call's retain_graph."""
    node: str | None
    """The node whose saved tensors were gone (its name varies by torch build)."""
    forward: Place | None
    """The scenario's forward line that created that node."""
    fix: str | None
    """The one-sentence fix the diagnoser gives."""
    checker: str | None
    """The page's checker fragment for the same case."""
    double_traversals: tuple[Traversal, ...]
    """Second backwards through nodes that saved no tensors (pytorch/pytorch#13494)."""
    text: str | None
    """The report as the diagnoser prints it, when there was an error."""


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
    diagnosis: Diagnosis | None
    """What the diagnoser reported on a third run, or None where the capture had none."""


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
    """A fixed loop (repro/loop.py fix()), run and measured."""

    key: str
    """Its key: 'fixed-...' (see repro/loop.py)."""
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
    raised_step: int | None
    """The step during which it raised."""
    steps: tuple[Step, ...]
    """The steps that completed, as measured."""
    fix: FixedRun
    """The fixed loop and what it did."""


@dataclass(frozen=True)
class CaseRun:
    """What backtwice/diagnose.py reported on one script of tests/diagnose_cases/."""

    ended: str | None
    """The exception the script ended with ('RuntimeError', 'SystemExit'), or None."""
    report: dict[str, Any]
    """The diagnoser's --json report, without its 'torch' (the environment names it), each
    file named relative to the case's folder ('gan.py')."""


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
    cases: dict[str, CaseRun]
    """The diagnoser's report on each script of tests/diagnose_cases/, by file name."""
    harness: str
    """sha256 of the capture's own code, backtwice/harness.py, capture.py and child.py (which
    pin the kernels), as it made these records; not compared between captures, but a build
    reuses a diagnoser case's record only from a snapshot made by the same code."""

    def comparable(self):
        """Return the snapshot as JSON data without what may vary between equal captures.

        The date, the build tag (a CUDA wheel and a CPU wheel of one torch version run these
        CPU scenarios alike, and which one a machine can install is not the reader's
        business), and what only decides whether a build may reuse a record: the capture's
        own code and the variables it ran under.
        """
        data = to_data(self)
        del data["environment"]["captured"]
        del data["environment"]["build"]
        del data["environment"]["variables"]
        del data["harness"]
        return data

    def same_records(self, other):
        """Whether comparable() would give the same data for both, compared as dataclasses
        (a fortieth of the time of turning both into JSON data)."""
        return _records(self) == _records(other)


def _records(snapshot):
    """A snapshot without what comparable() leaves out."""
    environment = dataclasses.replace(snapshot.environment, captured="", build="", variables="")
    return dataclasses.replace(snapshot, environment=environment, harness="")


def to_data(value):
    """Turn a dataclass tree into plain JSON data."""
    return json.loads(json.dumps(dataclasses.asdict(value)))


def dumps(snapshot):
    """Serialise deterministically: sorted keys, two-space indent, UTF-8, final newline."""
    return json.dumps(to_data(snapshot), indent=2, ensure_ascii=False, sort_keys=True) + "\n"


@functools.cache
def _shape(kind):
    """How to read a type, worked out once per type: (form, detail).

    Loading a snapshot builds thousands of objects of a dozen classes; their type hints are
    resolved here once per class, not once per object.
    """
    if kind is Any:
        return "any", None
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):
        (inner,) = [option for option in typing.get_args(kind) if option is not type(None)]
        return "optional", inner
    if dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind)
        return "dataclass", tuple(
            (field.name, hints[field.name]) for field in dataclasses.fields(kind)
        )
    if origin is tuple:
        return "tuple", typing.get_args(kind)[0]
    if origin is dict:
        return "dict", typing.get_args(kind)[1]
    return "plain", {bool: (bool,), int: (int,), float: (int, float), str: (str,)}[kind]


def _load(kind, data, where):
    """Build `kind` from JSON data, naming the field path of anything wrong."""
    form, detail = _shape(kind)
    if form == "any":
        return data
    if form == "optional":
        return None if data is None else _load(detail, data, where)
    if form == "dataclass":
        if not isinstance(data, dict):
            raise ValueError(f"field '{where}' should be an object")
        values = {}
        for name, hint in detail:
            path = f"{where}.{name}" if where else name
            if name not in data:
                raise ValueError(f"field '{path}' is missing")
            values[name] = _load(hint, data[name], path)
        return kind(**values)
    if form == "tuple":
        if not isinstance(data, list):
            raise ValueError(f"field '{where}' should be a list")
        return tuple(_load(detail, item, f"{where}[{i}]") for i, item in enumerate(data))
    if form == "dict":
        if not isinstance(data, dict):
            raise ValueError(f"field '{where}' should be an object")
        return {key: _load(detail, item, f"{where}.{key}") for key, item in data.items()}
    if not isinstance(data, detail) or (kind is int and isinstance(data, bool)):
        raise ValueError(f"field '{where}' should be of type {kind.__name__}")
    return data


@functools.cache
def _reader(kind):
    """A function that builds `kind` from JSON data as _load does, without naming field paths
    (a snapshot is read at every build, thousands of objects): it raises on anything _load
    would refuse, and then _load reads the data again to say where."""
    form, detail = _shape(kind)
    if form == "any":
        return _same
    if form == "optional":
        return lambda data: None if data is None else _reader(detail)(data)
    if form == "dataclass":
        return _dataclass_reader(kind, detail)
    if form in ("tuple", "dict"):
        return _container_reader(form, detail)
    exact = detail
    if kind is int:
        return lambda data: (
            data if isinstance(data, int) and data is not True and data is not False else _refuse()
        )
    return lambda data: data if isinstance(data, exact) else _refuse()


def _dataclass_reader(kind, fields):
    def read(data):
        if not isinstance(data, dict):
            _refuse()
        return kind(**{name: _reader(hint)(data[name]) for name, hint in fields})

    return read


def _container_reader(form, inner):
    if form == "tuple":
        return lambda data: (
            tuple(map(_reader(inner), data)) if isinstance(data, list) else _refuse()
        )
    return lambda data: (
        {key: _reader(inner)(item) for key, item in data.items()}
        if isinstance(data, dict)
        else _refuse()
    )


def _same(data):
    return data


def _refuse():
    raise ValueError("not what the snapshot's types say")


_PARSED = {}  # sha256 of a snapshot's text -> the Snapshot read from it


def parse(text, path):
    """Read a snapshot from its JSON text; `path` names it in errors.

    A text read before is not parsed again (a build reads the folder while the capture
    interpreter starts, then again to place its capture); snapshots are frozen.
    """
    key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if key not in _PARSED:
        if len(_PARSED) >= 16:
            _PARSED.clear()  # a folder's worth is enough, not every text ever read
        _PARSED[key] = _parse(text, path)
    return _PARSED[key]


def _parse(text, path):
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"is not valid JSON ({exc.msg}); {RECAPTURE}", exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError(path, f"is not a JSON object; {RECAPTURE}")
    found = data.get("schema")
    if isinstance(found, int) and not isinstance(found, bool) and found > SCHEMA:
        raise NewerSchema(path, NEWER.format(found=found, schema=SCHEMA))
    if found != SCHEMA:
        raise InputError(
            path,
            f"field 'schema' is {data.get('schema')!r} but this build reads schema {SCHEMA}; "
            f"{RECAPTURE}",
        )
    try:
        return _reader(Snapshot)(data)
    except Exception:  # _load, which names the field path, says what is wrong
        pass
    try:
        return _load(Snapshot, data, "")
    except ValueError as exc:
        raise InputError(path, f"{exc}; {RECAPTURE}") from None


class NewerSchema(InputError):
    """A snapshot written by a newer build: never read as ours, never overwritten."""


def load(path):
    """Read and validate one snapshot file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, f"no such snapshot; {RECAPTURE}") from None
    except UnicodeDecodeError:
        raise InputError(path, f"is not UTF-8 text; {RECAPTURE}") from None
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror})") from None
    return parse(text, path)


def load_replaceable(path):
    """Read the snapshot a recapture would replace: (Snapshot or None, notice or None).

    An absent file gives (None, None); a corrupt one (None, a notice saying it will be replaced);
    one of a newer schema raises NewerSchema, since this build must not overwrite it.
    """
    if not Path(path).exists():
        return None, None
    try:
        return load(path), None
    except NewerSchema:
        raise
    except InputError as exc:
        return None, f"notice: {exc}; replacing it with the fresh capture"


def file_name(torch_version):
    """Name the snapshot of a torch version: torch-2.13.0.json for '2.13.0' (or '2.13.0+cpu')."""
    return f"torch-{torch_version.split('+')[0]}.json"


def load_dir(directory, skip=(), allow_empty=False):
    """Read every snapshot in a folder, oldest torch first; `skip` names files to leave out."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise InputError(directory, "is a file, not a folder; give --snapshots a folder")
    if not directory.is_dir():
        if allow_empty:
            return []
        raise InputError(directory, f"no such snapshot folder; {RECAPTURE}")
    paths = [path for path in sorted(directory.glob("torch-*.json")) if path not in skip]
    if not paths and not allow_empty:
        raise InputError(directory, f"holds no torch-*.json snapshot; {RECAPTURE}")
    snapshots = []
    for path in paths:
        snapshot = load(path)
        if path.name != file_name(snapshot.environment.torch):
            raise InputError(
                path,
                f"field 'environment.torch' is {snapshot.environment.torch!r}, but the file name "
                f"says otherwise; name it {file_name(snapshot.environment.torch)} or {RECAPTURE}",
            )
        snapshots.append((path, snapshot))
    return by_version(snapshots)


def version_key(version):
    """Order torch versions numerically: '2.9.1' before '2.13.0'."""
    parts = []
    for part in version.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


@dataclass(frozen=True)
class Placed:
    """A fresh capture put among a folder's snapshots, before anything is written."""

    path: Path
    """The file it belongs in: DIR/torch-X.Y.Z.json."""
    fresh: Snapshot
    """The capture; or, when only the code that captured it changed, the file's own snapshot
    with the new `harness`, its records and date as they were."""
    previous: tuple[Path, Snapshot] | None
    """What it is compared with: the file it replaces, else the newest other snapshot."""
    written: bool
    """False when the file holds an equal capture, made by the same code, which is kept as it
    is, date included."""
    same_records: bool = False
    """True when it is written only to record the code that captured it (`harness`)."""


def _host(snapshot):
    """What of a capture's environment is not compared but decides reuse."""
    return snapshot.environment.build, snapshot.environment.variables


def by_version(snapshots):
    """Sort (path, Snapshot) pairs oldest torch first."""
    return sorted(snapshots, key=lambda item: version_key(item[1].environment.torch))


def combine(captures, directory, say):
    """Put fresh captures among the folder's snapshots, in memory; write nothing.

    Returns (the (path, Snapshot) pairs to render, one Placed per capture). A file a capture
    would replace that has a newer schema stops it (NewerSchema); a corrupt one is replaced, with
    a notice; one that holds an equal capture is kept, so its date stays. One whose equal
    records other capture code made gets this code's `harness` and nothing else (a build reuses
    a diagnoser case's record only from a snapshot made by the same code), unless it was
    captured with another torch build or other variables, when it is kept as it is.
    """
    directory = Path(directory)
    placed, chosen = [], []
    paths = [directory / file_name(capture.environment.torch) for capture in captures]
    others = load_dir(directory, skip=paths, allow_empty=True)
    for path, fresh in zip(paths, captures, strict=True):
        current, notice = load_replaceable(path)
        if notice:
            say(notice)
        same = current is not None and current.same_records(fresh)
        previous = (path, current) if current is not None else (others[-1] if others else None)
        if same and current.harness != fresh.harness and _host(current) == _host(fresh):
            kept = dataclasses.replace(current, harness=fresh.harness)
            placed.append(Placed(path, kept, previous, True, same_records=True))
            chosen.append((path, kept))
            continue
        placed.append(Placed(path, fresh, previous, not same))
        chosen.append((path, current if same else fresh))
    return by_version([*others, *chosen]), placed


def _stage(path, text):
    """Write text to a temporary file beside path, with the usual file mode; return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def write_all(files):
    """Write each (path, text) pair, all or none.

    Every text is first written to a temporary file beside its path; only when all are staged
    are they renamed into place. If staging or a rename fails, the temporary files are removed
    and the files already renamed are put back, so every path is left as it was. A path that is
    a symlink is written through it: the file it names is replaced and the link stays a link.
    """
    files = [(Path(path), Path(os.path.realpath(path)), text) for path, text in files]
    staged, renamed = [], []
    where = None
    try:
        for path, real, text in files:
            where = path
            staged.append((path, real, _stage(real, text)))
        backups = {real: (real.read_bytes() if real.is_file() else None) for _, real, _ in staged}
        for path, real, tmp in staged:
            where = path
            os.replace(tmp, real)
            renamed.append(real)
    except BaseException as exc:
        for _, _, tmp in staged:
            tmp.unlink(missing_ok=True)
        for real in renamed:
            if backups[real] is None:
                real.unlink(missing_ok=True)
            else:
                real.write_bytes(backups[real])
        if isinstance(exc, OSError):
            reason = exc.strerror or type(exc).__name__
            raise OutputError(where, f"cannot be written ({reason}); nothing was changed") from None
        raise


def write_atomic(path, text):
    """Write one file through a temporary file and a rename, so no half file is left."""
    write_all([(path, text)])
