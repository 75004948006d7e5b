"""The checker's data: for each of the 16 answer combinations, what its loop did, in words.

Every sentence here is derived from captured facts by the same rules for all combinations; the
page's script only looks the result up.
"""

import difflib
from dataclasses import dataclass

from .snapshot import LoopRun

QUESTIONS = (
    (
        "calls",
        "How many backward() or autograd.grad() calls reach the same graph in one step?",
        "Count the calls that run between two forward passes, including any inside helpers.",
        (("1", "One"), ("2", "Two")),
    ),
    (
        "retain",
        "Does the first of those calls pass retain_graph=True?",
        "Search the step for retain_graph; a helper may pass it for you.",
        (("no", "No"), ("yes", "Yes")),
    ),
    (
        "carried",
        "Is a tensor carried from one step to the next without detach()?",
        "A hidden state, running statistic or previous output reused in the next step's forward pass.",
        (("no", "No (none, or detached)"), ("yes", "Yes, carried without detach")),
    ),
    (
        "summed",
        "Are the losses summed into one tensor before backward?",
        "loss = loss_a + loss_b before calling backward, rather than calling it on each.",
        (("no", "No"), ("yes", "Yes")),
    ),
)

PRESETS = (
    ("Backward twice on one loss", "2nny"),
    ("RNN state not detached", "1nyn"),
    ("Two losses on one forward", "2nnn"),
    ("Losses summed", "1nny"),
    ("retain_graph=True", "1ynn"),
    ("RNN state detached", "1nnn"),
    ("GAN without detach", "2nnn"),
)

DEFAULT = "1nnn"


def fragment(key):
    """The URL fragment that selects a combination."""
    yes = {"y": "yes", "n": "no"}
    return f"calls={key[0]}&retain={yes[key[1]]}&carried={yes[key[2]]}&summed={yes[key[3]]}"


@dataclass(frozen=True)
class Verdict:
    """The checker's answer for one combination."""

    kind: str
    """'raises', 'costs' or 'runs'."""
    headline: str
    """One sentence: what the loop did."""


def _ratio(run, fixed):
    if not run.steps or not fixed.steps or fixed.steps[0].grad == 0:
        return None
    return run.steps[0].grad / fixed.steps[0].grad


def gradient_words(ratio):
    """Describe a gradient relative to the fixed loop's."""
    if abs(ratio - 1) < 1e-4:
        return "equal to the fixed loop's"
    if abs(ratio - 2) < 1e-4:
        return "doubled: twice the fixed loop's"
    return f"{ratio:.3g} times the fixed loop's"


def plural(count, noun):
    """'1 saved tensor', '2 saved tensors'."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def costs_of(run: LoopRun, fixed: LoopRun):
    """List what a loop that runs costs or breaks, from its steps."""
    costs = []
    depths = [s.depth for s in run.steps]
    saved = [s.saved for s in run.steps]
    if len(depths) > 1 and depths[-1] > depths[0]:
        costs.append(
            f"grows the graph: depth {', '.join(map(str, depths))} over {len(depths)} steps"
        )
    if len(saved) > 1 and saved[-1] > saved[0]:
        costs.append(
            f"grows memory: {', '.join(map(str, saved))} saved tensors alive after each step"
        )
    elif saved and min(saved) > 0:
        costs.append(
            f"keeps {plural(saved[0], 'saved tensor')} alive after every step, which the fixed loop frees"
        )
    ratio = _ratio(run, fixed)
    if ratio is not None and abs(ratio - 2) < 1e-4:
        costs.append("accumulates a doubled gradient: at step 1, twice the fixed loop's")
    elif ratio is not None and abs(ratio - 1) >= 1e-4:
        costs.append(f"gives a gradient at step 1 {ratio:.3g} times the fixed loop's")
    return tuple(costs)


def verdict(run: LoopRun, fixed: LoopRun):
    """Derive the verdict from the captured facts."""
    if run.raised is not None:
        call = (
            "the only"
            if run.calls == 1
            else ("the first" if run.raised_call == 1 else "the second")
        )
        return Verdict(
            "raises",
            f"Raises {run.raised.type} on step {run.raised_step}, at {call} backward call of that step.",
        )
    costs = costs_of(run, fixed)
    steps = len(run.steps)
    if costs:
        return Verdict("costs", f"Runs all {steps} steps, but it " + "; it ".join(costs) + ".")
    return Verdict("runs", f"Runs all {steps} steps with nothing retained or growing.")


def outcome_sentence(run: LoopRun, fixed: LoopRun):
    """Say what a loop that ran did: steps, depths, saved tensors, gradient."""
    depths = ", ".join(str(s.depth) for s in run.steps)
    saved = ", ".join(str(s.saved) for s in run.steps)
    ratio = _ratio(run, fixed)
    grad = f"gradient at step 1 {run.steps[0].grad:g}"
    if ratio is not None and run is not fixed:
        grad += f", {gradient_words(ratio)}"
    return f"ran {len(run.steps)} steps, depth {depths}, saved tensors alive after each step {saved}, {grad}"


def fix_edits(key, fixed_key):
    """Name the edits that turn one loop into its fix, from the answers that change."""
    calls, retain, carried, summed = key
    fixed_calls, fixed_retain, fixed_carried, fixed_summed = fixed_key
    edits = []
    if carried != fixed_carried:
        edits.append("detach the carried state")
    if calls != fixed_calls:
        edits.append(
            "drop the second backward call"
            if summed == fixed_summed
            else "sum the losses and call backward once"
        )
    if retain != fixed_retain:
        edits.append("drop retain_graph=True")
    return edits


def diff_lines(old, new):
    """A line diff of two sources as (kind, text) pairs: ' ', '-' or '+'."""
    lines = []
    for line in difflib.ndiff(old.splitlines(), new.splitlines()):
        if line[:1] in " -+":
            lines.append((line[:1], line[2:]))
    return lines


def section_of(key):
    """The page section that explains a combination's main problem."""
    if key[2] == "y":
        return "cause-2"
    if key[0] == "2":
        return "cause-1" if key[3] == "y" else "cause-3"
    if key[1] == "y":
        return "retain"
    return "causes"


def build(loops):
    """Turn the loops into the page's checker data, deduplicating repeated text."""
    strings = []
    index = {}

    def ref(text):
        if text is None:
            return None
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    results = {}
    rows = []
    for key, run in sorted(loops.items()):
        fixed = loops[run.fix]
        v = verdict(run, fixed)
        edits = fix_edits(key, run.fix)
        where = None
        if run.raised is not None:
            where = f"Step {run.raised_step}, line {run.raised.line}: {run.raised.code}"
        anomaly = None
        if run.anomaly is not None:
            anomaly = f"{run.anomaly.node}, created at line {run.anomaly.line}: {run.anomaly.code}"
        fix_text = (
            "This loop is already the fix." if key == run.fix else "Fix: " + ", ".join(edits) + "."
        )
        results[key] = {
            "kind": v.kind,
            "headline": ref(v.headline),
            "where": ref(where),
            "message": ref(
                None if run.raised is None else f"{run.raised.type}: {run.raised.message}"
            ),
            "anomaly": ref(anomaly),
            "fix": ref(fix_text),
            "diff": [[kind, ref(text)] for kind, text in diff_lines(run.source, fixed.source)],
            "outcome": ref(None if run.raised else f"This loop {outcome_sentence(run, fixed)}."),
            "fixed": ref(f"With the fix, the loop {outcome_sentence(fixed, fixed)}."),
            "section": section_of(key),
        }
        rows.append(
            {
                "key": key,
                "fragment": fragment(key),
                "verdict": v,
                "fix": fix_text,
                "run": run,
                "where": where,
                "anomaly": anomaly,
            }
        )
    return {"strings": strings, "results": results, "default": DEFAULT}, rows
