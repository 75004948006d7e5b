"""The drift report: what changed between two captures, and which sentences no longer hold."""

from dataclasses import dataclass

from . import claims
from . import facts as f
from .versions import word_changes


@dataclass(frozen=True)
class Change:
    """One way one scenario or loop changed between two captures."""

    kind: str
    """'scenario' or 'loop'."""
    ident: str
    """The scenario id or the loop key."""
    what: str
    """The change, e.g. 'verdict raises -> runs'."""

    def __str__(self):
        return f"{self.kind} {self.ident}: {self.what}"


def _verdict(run):
    return "raises" if run.raised is not None else "runs"


def run_changes(old, new):
    """Describe how one scenario or loop changed, one text per kind of change."""
    lines = []
    if _verdict(old) != _verdict(new):
        lines.append(f"verdict {_verdict(old)} -> {_verdict(new)}")
    elif old.raised and new.raised:
        if (old.raised.type, old.raised.line) != (new.raised.type, new.raised.line):
            lines.append(
                f"raised {old.raised.type} at line {old.raised.line} -> "
                f"{new.raised.type} at line {new.raised.line}"
            )
        if old.raised.message != new.raised.message:
            lines.append(f"text {word_changes(old.raised.message, new.raised.message)}")
    old_anomaly = old.anomaly.node if getattr(old, "anomaly", None) else None  # scenarios only
    new_anomaly = new.anomaly.node if getattr(new, "anomaly", None) else None
    if old_anomaly != new_anomaly:
        lines.append(f"anomaly mode names {old_anomaly} -> {new_anomaly}")
    return lines


def _step_text(s):
    grads = ", ".join(
        f"{g.name} {g.norm:g}" if g.norm is not None else f"{g.name} none" for g in s.grads
    )
    return f"{s.step}: depths {list(s.depths)}, saved {s.saved}, grads {grads}"


def figure_changes(old, new):
    """Describe changed printed figures of a scenario, or changed steps of a loop."""
    if hasattr(old, "outputs"):
        before = [o.text for o in old.outputs]
        after = [o.text for o in new.outputs]
    else:
        before = [_step_text(s) for s in old.steps]
        after = [_step_text(s) for s in new.steps]
    if before == after:
        return []
    changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
    if changed:
        a, b = changed[0]
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        return [f"figures {a!r} -> {b!r}{more}"]
    return [f"figures {len(before)} printed lines -> {len(after)}"]


def changes(old, new):
    """List every way a scenario or loop changed between two snapshots, as Change."""
    found = []
    for kind, old_runs, new_runs in (
        ("scenario", old.scenarios, new.scenarios),
        ("loop", old.loops, new.loops),
    ):
        for ident in sorted(set(old_runs) | set(new_runs)):
            if ident not in old_runs:
                whats = [f"new, {_verdict(new_runs[ident])}"]
            elif ident not in new_runs:
                whats = ["no longer captured"]
            else:
                a, b = old_runs[ident], new_runs[ident]
                whats = run_changes(a, b) + figure_changes(a, b)
            found += [Change(kind, ident, what) for what in whats]
    return found


def failing_claims(snapshot):
    """Name every sentence the snapshot makes false, with its section and the reason."""
    failing = []
    for claim in claims.CLAIMS:
        try:
            claim.check(snapshot)
        except (claims.Untrue, f.Missing) as exc:
            failing.append(f"section '{claim.section}': {claim.id} ({exc})")
    return failing


def report(old, new, old_name, new_name):
    """The drift report as text: changes, then the sentences that no longer hold."""
    lines = [
        f"drift from {old_name} (torch {old.environment.torch}) to {new_name} (torch {new.environment.torch}):"
    ]
    found = changes(old, new)
    lines += [f"  {line}" for line in found] or ["  no scenario or loop changed"]
    edited = sorted(
        name
        for name in set(old.sources) | set(new.sources)
        if old.sources.get(name) != new.sources.get(name)
    )
    if edited:
        lines.append(f"  files captured from other text than before: {', '.join(edited)}")
    failing = failing_claims(new)
    if failing:
        lines.append("claims that no longer hold (rewrite them in backtwice/claims.py):")
        lines += [f"  {line}" for line in failing]
    return "\n".join(lines) + "\n"
