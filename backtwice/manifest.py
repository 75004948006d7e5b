"""repro/: the scenarios the page runs, as declared in repro/scenarios.toml.

Every file is read once, here: the text that is hashed into the snapshot is the text that runs
and the text the page shows, so editing a file during a capture cannot mix two versions.
"""

import hashlib
import re
import sys
import tomllib
import types
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

MANIFEST = "scenarios.toml"
SUPPORT = "support.py"
# The diagnoser runs on every scenario at capture, and the page shows its source: it is hashed
# with repro/'s files, under this name.
DIAGNOSER = "backtwice/diagnose.py"
DIAGNOSER_FILE = Path(__file__).with_name("diagnose.py")
LOOP_BUILDER = "loop.py"
# The diagnoser's test cases, beside repro/ in the project: the capture runs each under the
# diagnoser and hashes it under this folder's name, as it does repro/'s files.
CASES = "tests/diagnose_cases"
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 600.0
EXPECTS = ("raises", "runs")
PLAIN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class Scenario:
    """One scenario: a file in repro/ and what it is declared to do."""

    id: str
    """The file's stem: repro/<id>.py."""
    title: str
    """A short human title, used on the page."""
    expect: str
    """'raises' or 'runs'."""
    timeout: float
    """Seconds the scenario may run before the capture gives up on it."""
    path: Path
    """The scenario's file."""
    source: str
    """The file's text, read once: what runs, what is hashed and what the page shows."""


@dataclass(frozen=True)
class Case:
    """One script of tests/diagnose_cases/, which the capture runs under the diagnoser."""

    name: str
    """The file's name, e.g. 'gan.py': the snapshot's key for its report."""
    path: Path
    """The file."""
    source: str
    """The file's text, read once: what runs and what is hashed."""


@dataclass(frozen=True)
class Repro:
    """Everything a capture or a render reads from repro/, read once."""

    scenarios: tuple[Scenario, ...]
    """The declared scenarios, in manifest order."""
    sources: dict[str, str]
    """Every file's text by file name: scenarios, the manifest, support.py, loop.py and
    backtwice/diagnose.py (DIAGNOSER)."""
    builder: types.ModuleType | None
    """repro/loop.py, executed from the text in `sources`, or None where there is none."""
    folder: Path
    """The repro folder."""
    cases: tuple[Case, ...] = ()
    """The diagnoser's cases in CASES beside the repro folder, by name; their text is also in
    `sources`, under CASES/NAME."""

    def path_of(self, name):
        """The file a name in `sources` was read from."""
        if name == DIAGNOSER:
            return DIAGNOSER_FILE
        if name.startswith(CASES + "/"):
            return self.folder.parent / name
        return self.folder / name

    def hashes(self):
        """sha256 of each file's text, by file name, as the snapshot records them."""
        return {name: sha256(text) for name, text in sorted(self.sources.items())}


def sha256(text):
    """Hash source text the way the snapshot records it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_text(path):
    """Read a repro/ file as UTF-8, or say in one line why it cannot be."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "no such file; create it") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror})") from None


def _line_of(text, ident):
    """The manifest line that declares `id = "<ident>"`, for error messages."""
    pattern = re.compile(r"^\s*id\s*=\s*[\"']" + re.escape(str(ident)) + r"[\"']", re.M)
    found = pattern.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else None


KINDS = {str: "a string", float: "a number", bool: "true or false"}


def _field(entry, name, kind, where, default=None):
    """Read one field, naming it, its value and the type it should have when it is wrong."""
    value = entry.get(name, default)
    ok = isinstance(value, (int, float)) if kind is float else isinstance(value, kind)
    if not ok or (isinstance(value, bool) and kind is not bool):
        raise InputError(
            where.file,
            f"{where.label}: field '{name}' is {value!r}; it must be {KINDS[kind]}",
            where.line,
        )
    return value


@dataclass(frozen=True)
class _Where:
    file: Path
    label: str
    line: int | None


def _scenario(entry, number, text, repro, path):
    if not isinstance(entry, dict):
        raise InputError(path, f"[[scenario]] number {number} is not a table; fix the entry")
    where = _Where(path, f"scenario number {number}", None)
    ident = _field(entry, "id", str, where)
    where = _Where(path, f"scenario '{ident}'", _line_of(text, ident))
    if not PLAIN_ID.fullmatch(ident):
        raise InputError(
            path,
            f"{where.label}: field 'id' must be a plain file name (letters, digits, _ and -), "
            f"naming repro/<id>.py; rename it",
            where.line,
        )
    unknown = sorted(set(entry) - {"id", "title", "expect", "timeout"})
    if unknown:
        raise InputError(
            path,
            f"{where.label}: unknown field '{unknown[0]}'; the fields are id, title, expect and timeout",
            where.line,
        )
    expect = _field(entry, "expect", str, where)
    if expect not in EXPECTS:
        raise InputError(
            path, f"{where.label}: field 'expect' is {expect!r}; use 'raises' or 'runs'", where.line
        )
    timeout = float(_field(entry, "timeout", float, where, DEFAULT_TIMEOUT))
    if not 0 < timeout <= MAX_TIMEOUT:
        raise InputError(
            path,
            f"{where.label}: field 'timeout' is {timeout:g}; give seconds above 0 and at most {MAX_TIMEOUT:g}",
            where.line,
        )
    title = _field(entry, "title", str, where, ident)
    file = repro / f"{ident}.py"
    if not file.is_file():
        raise InputError(
            path,
            f"{where.label}: field 'id' names {file}, which does not exist; add the file",
            where.line,
        )
    return Scenario(ident, title, expect, timeout, file, read_text(file))


def load_manifest(repro):
    """Read repro/scenarios.toml and every scenario's file; return the scenarios."""
    return read_manifest(repro)[0]


def read_manifest(repro):
    """Read repro/scenarios.toml and every scenario's file; return (scenarios, manifest text)."""
    repro = Path(repro)
    path = repro / MANIFEST
    try:
        text = read_text(path)
    except InputError as exc:
        if not path.exists():
            raise InputError(
                path, "no such manifest; create it with one [[scenario]] per file"
            ) from None
        raise exc from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"is not valid TOML ({exc})") from None
    entries = data.get("scenario", [])
    if not isinstance(entries, list):
        raise InputError(path, "'scenario' must be an array of tables: write [[scenario]]")
    scenarios = []
    seen = set()
    for number, entry in enumerate(entries, 1):
        scenario = _scenario(entry, number, text, repro, path)
        if scenario.id in seen:
            raise InputError(
                path,
                f"scenario '{scenario.id}': field 'id' is used twice; give each scenario its own id",
                _line_of(text, scenario.id),
            )
        seen.add(scenario.id)
        scenarios.append(scenario)
    if not scenarios:
        raise InputError(path, "declares no [[scenario]]; add at least one")
    return tuple(scenarios), text


def load_module(name, path, text):
    """Execute module source text (standard library only) as module `name`."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    try:
        exec(compile(text, str(path), "exec"), module.__dict__)
    except Exception as exc:
        del sys.modules[name]
        raise InputError(path, f"cannot be loaded ({type(exc).__name__}: {exc}); fix it") from None
    return module


def load(repro):
    """Read repro/ once: the manifest, each scenario, support.py and the loop builder."""
    repro = Path(repro)
    scenarios, manifest_text = read_manifest(repro)
    sources = {MANIFEST: manifest_text}
    sources.update({s.path.name: s.source for s in scenarios})
    builder = None
    for name in (SUPPORT, LOOP_BUILDER):
        if (repro / name).is_file():
            sources[name] = read_text(repro / name)
    sources[DIAGNOSER] = read_text(DIAGNOSER_FILE)
    if LOOP_BUILDER in sources:
        builder = load_module("repro_loop", repro / LOOP_BUILDER, sources[LOOP_BUILDER])
    cases = load_cases(repro.parent / CASES)
    sources.update({f"{CASES}/{case.name}": case.source for case in cases})
    return Repro(scenarios, sources, builder, repro, cases)


def load_cases(folder):
    """Read every *.py in the cases folder, by name; none where there is no such folder."""
    return tuple(Case(p.name, p, read_text(p)) for p in sorted(Path(folder).glob("*.py")))


def changed(repro):
    """The names of the files whose text on disk is no longer the text `repro` read."""
    found = []
    for name, text in sorted(repro.sources.items()):
        path = repro.path_of(name)
        try:
            now = Path(path).read_text(encoding="utf-8")  # as load() read it
        except (OSError, UnicodeDecodeError):
            now = None
        if now != text:
            found.append(name)
    return found


def load_loop_builder(repro):
    """repro/loop.py as a module, or None where there is none."""
    return load(repro).builder
