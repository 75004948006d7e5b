"""Comparing snapshots of several torch versions: the page's matrix and word-level diffs."""

import difflib

from markupsafe import Markup, escape


def word_ops(old, new):
    """Split two texts into runs of words: ('equal', words, words) or ('change', removed, added)."""
    a, b = old.split(" "), new.split(" ")
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        yield ("equal" if op == "equal" else "change"), " ".join(a[i1:i2]), " ".join(b[j1:j2])


def word_diff(old, new):
    """Mark the words that differ between two texts with <del> and <ins>."""
    parts = []
    for op, removed, added in word_ops(old, new):
        if op == "equal":
            parts.append(escape(removed))
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

    Returns None with fewer than two snapshots.
    """
    if len(snapshots) < 2:
        return None
    newest = snapshots[-1][1]
    versions = [s.environment.torch for _, s in snapshots]
    rows = []
    for ident in sorted(newest.scenarios):
        latest = newest.scenarios[ident]
        cells = []
        for _, snap in snapshots:
            run = snap.scenarios.get(ident)
            cell = {"outcome": outcome(run), "same": True, "diff": None}
            if (
                run is not None
                and run.raised
                and latest.raised
                and run.raised.message != latest.raised.message
            ):
                cell["same"] = False
                cell["diff"] = word_diff(run.raised.message, latest.raised.message)
            cells.append(cell)
        rows.append({"id": ident, "cells": cells})
    return {"versions": versions, "rows": rows}
