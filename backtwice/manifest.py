"""repro/: the scenarios the page runs, as declared in repro/scenarios.toml."""

import hashlib
import importlib.util
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

MANIFEST = "scenarios.toml"
SUPPORT = "support.py"
LOOP_BUILDER = "loop.py"
DEFAULT_TIMEOUT = 30.0
EXPECTS = ("raises", "runs")


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


def sha256(text):
    """Hash source text the way the snapshot records it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _field(entry, name, kind, where, default=None):
    value = entry.get(name, default)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InputError(where, f"scenario field '{name}' must be a {kind.__name__}; fix the entry")
    return value


def load_manifest(repro):
    """Read repro/scenarios.toml and check that every scenario's file exists."""
    repro = Path(repro)
    path = repro / MANIFEST
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            path, "no such manifest; create it with one [[scenario]] per file"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"is not valid TOML ({exc})") from None
    scenarios = []
    seen = set()
    for entry in data.get("scenario", []):
        ident = _field(entry, "id", str, path)
        where = f"{path} [scenario '{ident}']"
        expect = _field(entry, "expect", str, where)
        if expect not in EXPECTS:
            raise InputError(where, f"field 'expect' is {expect!r}; use 'raises' or 'runs'")
        if ident in seen:
            raise InputError(where, "field 'id' is used twice; give each scenario its own id")
        seen.add(ident)
        file = repro / f"{ident}.py"
        if not file.is_file():
            raise InputError(where, f"field 'id' names {file}, which does not exist; add the file")
        timeout = float(_field(entry, "timeout", (int, float), where, DEFAULT_TIMEOUT))
        title = _field(entry, "title", str, where, ident)
        scenarios.append(Scenario(ident, title, expect, timeout, file))
    if not scenarios:
        raise InputError(path, "declares no [[scenario]]; add at least one")
    return scenarios


def source_hashes(repro, scenarios):
    """Hash every file a capture depends on, by file name."""
    repro = Path(repro)
    files = [scenario.path for scenario in scenarios]
    files += [repro / name for name in (SUPPORT, LOOP_BUILDER) if (repro / name).is_file()]
    return {file.name: sha256(file.read_text(encoding="utf-8")) for file in files}


def load_loop_builder(repro):
    """Import repro/loop.py (standard library only), or return None where there is none."""
    path = Path(repro) / LOOP_BUILDER
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("repro_loop", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
