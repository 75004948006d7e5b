"""Read the marker comments of tests/diagnose_cases/ and check a diagnoser report against them.

Shared by the tests that run the cases here (tests/test_diagnose.py) and those that read the
reports the capture recorded on every kept torch (tests/test_diagnose_snapshots.py).
"""

import re

from backtwice import diagnose

from .conftest import ROOT

CASES = ROOT / "tests" / "diagnose_cases"
# Cases the diagnoser still gets wrong (written and checked as the others are): not captured,
# and tests/test_diagnose.py fails once one of them passes, to be moved into CASES.
PENDING = ROOT / "tests" / "diagnose_pending"
LABELLED = {"raises", "frees", "forward", "kept", "changed"}
# Nodes that saved only a Python number below one that saved tensors are dated by their
# sequence number, which torch 2.0 does not give Python: there these cases name other lines.
# Where several freed nodes are found, the latest is named (by that number too): kalman_cov.py's,
# a trainer's forward under its double-backward penalty, an actor-critic's value head on its trunk.
SEQUENCE_NEEDED = {"scalar_rand_target.py", "scalar_aux_weight.py", "scalar_temperature.py"}
SEQUENCE_NEEDED |= {"kalman_cov.py", "trainer_class_callbacks.py", "ac_shared_trunk_two_opts.py"}
# An EMA run with autograd on: its nodes saved only the decay, so they are dated that way too.
SEQUENCE_NEEDED |= {"mean_teacher_ema_update.py"}
# torch 2.0's non-reentrant checkpoint saves through saved-tensor hooks of its own, which hide
# the diagnoser's inside the checkpointed call: there it sees no node to name (cause None).
OWN_HOOKS_BEFORE_2_1 = {"ckpt_memory.py"}
# torch 2.0 has no torch.amp.GradScaler (a CPU GradScaler came later): the case cannot run there.
NEWER_API = {"amp_two_opts.py"}


def path_of(name):
    """The case's file, in CASES or PENDING; a path as it is (a fresh case of bench/fresh)."""
    if not isinstance(name, str):
        return name
    return CASES / name if (CASES / name).exists() else PENDING / name


def expected(name):
    """The lines each `# expect: ...` marker names, and the `# expect-KEY: VALUE` headers (a
    list per key: -fix, -not-fix and -where may repeat)."""
    lines = {}
    headers = {}
    for number, text in enumerate(path_of(name).read_text().splitlines(), start=1):
        found = re.search(r"# expect: ([\w -]+)$", text)
        if found:
            for word in found.group(1).split():
                lines.setdefault(word, []).append(number)
        header = re.match(r"\s*# expect-([\w-]+)(?:: (.+))?$", text)
        if header:
            headers.setdefault(header.group(1), []).append((header.group(2) or "").strip())
    if "clean" in headers:
        headers["cause"] = ["none"]
    return lines, headers


def applied(text, edits):
    """The text with a fix's edits applied literally (each `{"start", "end", "new"}`), as a
    reader would make them: not by the diagnoser's own code."""
    lines = text.splitlines(True)
    for edit in sorted(edits, key=lambda e: -e["start"]):
        lines[edit["start"] - 1 : edit["end"]] = edit["new"].splitlines(True)
    return "".join(lines)


NAMES = sorted(p.name for p in CASES.glob("*.py"))
WRONG = sorted(p.name for p in PENDING.glob("*.py"))
RAISING = [name for name in NAMES if expected(name)[1].get("cause") != ["none"]]


def beyond(name, torch_version):
    """Whether this torch cannot date the case's nodes or hides them (torch 2.0, above)."""
    beyond_2_0 = SEQUENCE_NEEDED | OWN_HOOKS_BEFORE_2_1 | NEWER_API
    return name in beyond_2_0 and torch_version.startswith("2.0.")


def check_places(report, name, shown):
    """Check the cause and the raising, freeing, forward and caller lines the markers name;
    `shown` is how the report names the case's file."""
    lines, headers = expected(name)
    source = path_of(name).read_text().splitlines()
    assert report["cause"] == headers["cause"][0], name
    assert report["raised"]["line"] == lines["raises"][0], name
    assert report["raised"]["file"] == shown, name
    assert report["raised"]["code"] == source[lines["raises"][0] - 1].strip(), name
    freeing = lines.get("frees", lines.get("kept"))
    if freeing:
        assert report["freed_by"]["line"] == freeing[0], name
        assert report["freed_by"]["retain_graph"] is ("kept" in lines), name
    if "forward" in lines:
        assert report["node"]["line"] == lines["forward"][0], name
        assert report["node"]["file"] == shown, name
    for kind, place in (("caller-raises", "raised"), ("caller-frees", "freed_by")):
        if kind in lines:
            assert lines[kind][0] in [c["line"] for c in report[place]["callers"]], (name, kind)
    checker = report["checker"].replace("retain=retain", "retain=none")
    assert checker in diagnose.CHECKER.values(), name
    if "checker" in headers:
        assert report["checker"] == diagnose.CHECKER[headers["checker"][0]], name


def check_labels(report, name):
    """Check that every marked line is labelled with its kind, in source order."""
    lines, _ = expected(name)
    found = {(e["kind"], e["line"]) for e in report["lines"]}
    for kind in LABELLED & set(lines):
        assert (kind, lines[kind][0]) in found, (name, kind)
    order = [(e["file"], e["line"]) for e in report["lines"]]
    assert order == sorted(order), name
    assert all(e["label"] and e["code"] for e in report["lines"]), name


def check_fix(report, name, shown, markers=None):
    """Check that the fix names a marked line and holds (or leaves out) the marked phrases;
    `markers`, if given, stands for the case's (lines, headers)."""
    lines, headers = markers or expected(name)
    text = diagnose.format_report(report)
    kinds = ("raises", "frees", "forward", "kept", "caller-raises", "caller-frees")
    named = {ln for kind in kinds for ln in lines.get(kind, [])}
    assert any(f"{shown}:{ln}" in report["fix"] for ln in named), (name, report["fix"])
    # Phrases are looked for in the words, not in the places: a case named hidden_detach.py
    # would otherwise find "hidden" and "detach" in every fix that names its lines.
    fix = re.sub(r"\S+\.py:\d+", "FILE:LINE", report["fix"]).lower()
    for phrase in headers.get("fix", []):
        assert phrase.lower() in fix, (name, phrase)
    for phrase in headers.get("not-fix", []):
        assert phrase.lower() not in fix, (name, phrase)
    for phrase in headers.get("where", []):
        assert phrase in text, (name, phrase)
    if headers["cause"][0] == "carried-state":
        assert "retain_graph" not in fix, name
    if headers["cause"][0] == "same-loss-twice":
        assert "once" in fix, name


def check_clean(report, name):
    """Check a case marked `# expect-clean`: no error, and the double traversals it marks."""
    lines, _ = expected(name)
    assert report["error"] is None and report["cause"] is None, name
    assert report["raised"] is None and report["freed_by"] is None and report["node"] is None
    marked = list(zip(lines.get("first", []), lines.get("second", []), strict=True))
    found = [(d["first"]["line"], d["second"]["line"]) for d in report["double_traversals"]]
    assert found == marked, name


def check_report(report, name, shown):
    """Check a report against every marker of its case."""
    if expected(name)[1].get("cause") == ["none"]:
        check_clean(report, name)
        return
    check_places(report, name, shown)
    check_labels(report, name)
    check_fix(report, name, shown)
