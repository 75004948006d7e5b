"""Comparing snapshots of several torch versions: the page's matrix and word-level diffs."""

import difflib

from markupsafe import Markup, escape


def word_ops(old, new):
    """Split two texts into runs of words: ('equal', words, words) or ('change', removed, added)."""
    a, b = old.split(" "), new.split(" ")
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        yield ("equal" if op == "equal" else "change"), " ".join(a[i1:i2]), " ".join(b[j1:j2])


def word_diff(old, new, context=3):
    """Mark the words that differ between two texts with <del> and <ins>.

    Runs of equal words longer than twice `context` keep `context` words at each end around "…".
    """
    ops = list(word_ops(old, new))
    parts = []
    for i, (op, removed, added) in enumerate(ops):
        if op == "equal":
            words = removed.split(" ")
            head = words[:context] if i > 0 else []
            tail = words[-context:] if i < len(ops) - 1 else []
            if len(words) > len(head) + len(tail) + 1:
                words = head + ["…"] + tail
            parts.append(escape(" ".join(words)))
            continue
        if removed:
            parts.append(Markup("<del>{}</del>").format(removed))
        if added:
            parts.append(Markup("<ins>{}</ins>").format(added))
    return Markup(" ").join(parts)


def word_changes(old, new):
    """Show the words that differ between two texts as [-old-]{+new+}, for a terminal."""
    parts = []
    for op, removed, added in word_ops(old, new):
        if op == "equal":
            parts.append(removed)
            continue
        if removed:
            parts.append(f"[-{removed}-]")
        if added:
            parts.append(f"{{+{added}+}}")
    return " ".join(parts)


def outcome(run):
    """'raises' or 'runs' for a scenario run, or None when it is absent."""
    if run is None:
        return None
    return "raises" if run.raised is not None else "runs"


def matrix(snapshots):
    """For each scenario and torch version: the outcome and whether the text is the newest's.

    Also each distinct change of message text, with the versions that had the older wording.
    Returns None with fewer than two snapshots.
    """
    if len(snapshots) < 2:
        return None
    newest = snapshots[-1][1]
    versions = [s.environment.torch for _, s in snapshots]
    rows = []
    changes = {}
    for ident in sorted(newest.scenarios):
        latest = newest.scenarios[ident]
        cells = []
        for _, snap in snapshots:
            run = snap.scenarios.get(ident)
            cell = {"outcome": outcome(run), "same": True}
            if (
                run is not None
                and run.raised
                and latest.raised
                and run.raised.message != latest.raised.message
            ):
                cell["same"] = False
                change = changes.setdefault(
                    (run.raised.message, latest.raised.message), {"ids": [], "old": []}
                )
                if ident not in change["ids"]:
                    change["ids"].append(ident)
                change["old"].append(snap.environment.torch)
            cells.append(cell)
        same = all(c["same"] and c["outcome"] == outcome(latest) for c in cells)
        rows.append({"id": ident, "cells": cells, "same": same})
    shown = [
        {
            "ids": change["ids"],
            "old": join(sorted(set(change["old"]), key=versions.index)),
            "new": versions[-1],
            "diff": word_diff(old, new),
        }
        for (old, new), change in changes.items()
    ]
    return {"versions": versions, "rows": rows, "changes": shown, "summary": summary(snapshots)}


def _figures(run):
    if hasattr(run, "outputs"):
        return tuple(o.text for o in run.outputs)
    return run.steps


# What is compared across versions: a name for the sentence and the part of a run that must be
# equal. Only scenarios are run under anomaly mode (a loop has no anomaly field): its name says so.
ASPECTS = (
    ("whether it raises", outcome),
    ("the exception text", lambda run: run.raised and (run.raised.type, run.raised.message)),
    ("the line that raised", lambda run: run.raised and run.raised.line),
    (
        "the node anomaly mode names in a scenario",
        lambda run: getattr(run, "anomaly", None) and (run.anomaly.node, run.anomaly.line),
    ),
    ("the printed numbers", _figures),
)


def differences(snapshots):
    """For each aspect: [(name, versions on which it differs from the newest)], in order."""
    newest = snapshots[-1][1]
    found = {aspect: [] for aspect, _ in ASPECTS}
    for kind, runs_of in (("", lambda s: s.scenarios), ("loop ", lambda s: s.loops)):
        for ident in sorted(runs_of(newest)):
            latest = runs_of(newest)[ident]
            for aspect, part in ASPECTS:
                other = [
                    snap.environment.torch
                    for _, snap in snapshots[:-1]
                    if ident not in runs_of(snap) or part(runs_of(snap)[ident]) != part(latest)
                ]
                if other:
                    found[aspect].append((kind + ident, other))
    return found


def join(words):
    """'a', 'a and b', 'a, b and c', as Markup (plain words are escaped)."""
    words = [escape(word) for word in words]
    return words[0] if len(words) == 1 else Markup(", ").join(words[:-1]) + " and " + words[-1]


def _plural(count, noun):
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _changed(aspect, items):
    scenarios = [n for n, _ in items if not n.startswith("loop ")]
    loops = [n for n, _ in items if n.startswith("loop ")]
    whose = [
        _plural(len(group), noun) for group, noun in ((scenarios, "scenario"), (loops, "loop"))
    ]
    old = sorted(
        {v for _, versions in items for v in versions}, key=lambda v: tuple(map(int, v.split(".")))
    )
    return Markup("{} of {} (torch {})").format(
        aspect, join([w for w in whose if not w.startswith("0 ")]), join(old)
    )


def summary(snapshots):
    """One sentence, from the data alone: what held on every version and what changed."""
    newest = snapshots[-1][1]
    found = differences(snapshots)
    held = [aspect for aspect, items in found.items() if not items]
    changed = [_changed(aspect, items) for aspect, items in found.items() if items]
    # The versions are named in the summary line just above it.
    start = Markup("All {} scenarios ").format(len(newest.scenarios))
    if newest.loops:
        start = Markup("All {} scenarios and {} checker loops ").format(
            len(newest.scenarios), len(newest.loops)
        )
    same = Markup("agree on {}").format(join(held)) if held else Markup("differ in every way")
    if not changed:
        return start + same + Markup(".")
    return start + same + Markup("; older versions differ in {}.").format(join(changed))
