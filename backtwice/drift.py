"""The drift report: what changed between two captures, and which sentences no longer hold."""

from . import claims
from . import facts as f
from .versions import word_changes


def _verdict(run):
    return "raises" if run.raised is not None else "runs"


def run_changes(name, old, new):
    """Describe how one scenario or loop changed, one line per kind of change."""
    lines = []
    if _verdict(old) != _verdict(new):
        lines.append(f"{name}: verdict {_verdict(old)} -> {_verdict(new)}")
    elif old.raised and new.raised:
        if (old.raised.type, old.raised.line) != (new.raised.type, new.raised.line):
            lines.append(
                f"{name}: raised {old.raised.type} at line {old.raised.line} -> "
                f"{new.raised.type} at line {new.raised.line}"
            )
        if old.raised.message != new.raised.message:
            lines.append(f"{name}: text {word_changes(old.raised.message, new.raised.message)}")
    old_anomaly = old.anomaly.node if old.anomaly else None
    new_anomaly = new.anomaly.node if new.anomaly else None
    if old_anomaly != new_anomaly:
        lines.append(f"{name}: anomaly mode names {old_anomaly} -> {new_anomaly}")
    return lines


def _step_text(s):
    grads = ", ".join(
        f"{g.name} {g.norm:g}" if g.norm is not None else f"{g.name} none" for g in s.grads
    )
    return f"{s.step}: depths {list(s.depths)}, saved {s.saved}, grads {grads}"


def figure_changes(name, old, new):
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
        return [f"{name}: figures {a!r} -> {b!r}{more}"]
    return [f"{name}: figures {len(before)} printed lines -> {len(after)}"]


def changes(old, new):
    """List every scenario and loop that changed between two snapshots, one line each."""
    lines = []
    for kind, old_runs, new_runs in (
        ("scenario", old.scenarios, new.scenarios),
        ("loop", old.loops, new.loops),
    ):
        for ident in sorted(set(old_runs) | set(new_runs)):
            name = f"{kind} {ident}"
            if ident not in old_runs:
                lines.append(f"{name}: new, {_verdict(new_runs[ident])}")
            elif ident not in new_runs:
                lines.append(f"{name}: no longer captured")
            else:
                a, b = old_runs[ident], new_runs[ident]
                lines += run_changes(name, a, b) + figure_changes(name, a, b)
    return lines


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
