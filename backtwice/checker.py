"""The checker's data: for each answer combination, what its loop did, in words.

Every sentence that states what a loop did is derived from its captured runs by the same rules
for all combinations; the page's script only looks the result up.
"""

import difflib
from dataclasses import dataclass

from .snapshot import LoopRun, Step

OTHER = ("other", "None of these fits")

QUESTIONS = (
    (
        "when",
        "When does it raise?",
        "",
        (
            ("first", "On the first step"),
            ("later", "On a later step"),
            ("saved", "When reading a saved tensor (grad_fn._saved_*, a graph viewer)"),
            OTHER,
        ),
    ),
    (
        "calls",
        "What backward calls does a step make?",
        "Count backward() and autograd.grad() calls, in helpers too.",
        (
            ("one", "One backward()"),
            ("twice", "backward() twice on the same loss"),
            ("shared", "backward() on two losses from one forward pass"),
            ("gan", "A GAN: D's backward, then G's"),
            ("grad", "autograd.grad() (a gradient penalty), then backward()"),
            OTHER,
        ),
    ),
    (
        "reach",
        "What does the forward pass reuse from an earlier step?",
        "Anything with a grad_fn from an earlier step or before the loop.",
        (
            ("nothing", "Nothing: fresh data each step"),
            ("rnn", "An RNN or GRU hidden state, not detached"),
            ("lstm", "An LSTM state with h detached, c not"),
            ("before", "A tensor computed from parameters before the loop (a normalised weight)"),
            ("total", "A running total of the loss, with backward() on it"),
            ("kept", "Outputs kept in a list or replay buffer"),
            OTHER,
        ),
    ),
    (
        "retain",
        "Did you add retain_graph=True or create_graph=True?",
        "Count one you added because the message suggested it.",
        (
            ("none", "Neither"),
            ("retain", "retain_graph=True on the first call"),
            ("create", "create_graph=True on autograd.grad()"),
            OTHER,
        ),
    ),
)

NAMES = tuple(q[0] for q in QUESTIONS)

# Each preset: its name, the loop that is that case, and the page section that explains it.
PRESETS = (
    ("Same loss twice", "first-twice-nothing-none", "cause-1"),
    ("RNN state not detached", "later-one-rnn-none", "cause-2"),
    ("LSTM with only h detached", "later-one-lstm-none", "cause-2"),
    ("Tensor computed before the loop", "later-one-before-none", "cause-2"),
    ("Running total of the loss", "later-one-total-none", "cause-2"),
    ("Outputs kept in a list", "later-one-kept-none", "cause-2"),
    ("Two losses, one forward pass", "first-shared-nothing-none", "cause-3"),
    ("GAN without detach", "first-gan-nothing-none", "cause-4"),
    ("Gradient penalty", "first-grad-nothing-none", "grad"),
    ("Reading saved tensors after backward", "saved-one-nothing-none", "saved"),
    ("retain_graph=True, then an in-place error", "later-one-rnn-retain", "inplace"),
)

# The expert's edit for each answer that the fix changes (the diff below it shows the lines).
EDITS = {
    ("calls", "twice"): "drop the second backward() call",
    ("calls", "shared"): "add the losses and call backward() once on the sum",
    ("calls", "gan"): "give the discriminator's loss D(fake.detach()); the generator's loss "
    "keeps D(fake)",
    ("calls", "grad"): "pass create_graph=True to autograd.grad",
    ("reach", "rnn"): "detach the hidden state at the step boundary",
    ("reach", "lstm"): "detach both h and c at the step boundary",
    ("reach", "before"): "compute the tensor inside the loop, from the parameters as they are now",
    ("reach", "total"): "call backward() on the step's loss and add loss.item() to the total",
    (
        "reach",
        "kept",
    ): "keep the inputs, not the outputs, and run the forward pass on them each step",
    ("when", "saved"): "read what you need before backward() frees it",
    ("retain", "retain"): "drop retain_graph=True",
}

INPLACE = "modified by an inplace operation"


def fragment(key):
    """The URL fragment that selects a combination."""
    return "&".join(f"{name}={value}" for name, value in zip(NAMES, key.split("-"), strict=True))


def plural(count, noun):
    """'1 saved tensor', '2 saved tensors'."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def call_of(code):
    """The call a source line makes, without its comment: 'loss.backward()'."""
    return code.split("  #")[0].strip()


@dataclass(frozen=True)
class Verdict:
    """The checker's answer for one combination."""

    kind: str
    """'raises' (this error), 'inplace' (the in-place error), 'costs' or 'runs'."""
    headline: str
    """One sentence: what the loop did."""


def _where(run):
    code = call_of(run.raised.code or "")
    if ".backward(" in code or "autograd.grad(" in code:
        return f"at {code}"
    return f"when {code} reads a saved tensor"


def first_clause(message):
    """The message up to its first full stop, parenthesis or colon."""
    cuts = [i for i in (message.find(". "), message.find(" ("), message.find(": ")) if i > 0]
    return message[: min(cuts)] if cuts else message.rstrip(".")


def _same(a, b):
    return abs(a - b) <= 1e-4 * max(abs(a), abs(b), 1e-12)


def compare_grads(steps, fixed_steps):
    """Compare per-parameter gradients with the fixed loop's, step by step.

    Returns (per-step words, first step that differs or None).
    """
    words, first_diff = [], None
    for mine, theirs in zip(steps, fixed_steps, strict=False):
        a = {g.name: g.norm for g in mine.grads}
        b = {g.name: g.norm for g in theirs.grads}
        if a == b or all(
            a.get(n) is not None and b.get(n) is not None and _same(a[n], b[n]) for n in b
        ):
            words.append((mine.step, "equal"))
            continue
        first_diff = first_diff or mine.step
        ratios = {
            round(a[n] / b[n], 4) for n in b if a.get(n) is not None and b.get(n) not in (None, 0)
        }
        paired = set(a) == set(b) and all((a[n] is None) == (b[n] is None) for n in b)
        if len(ratios) == 1 and paired:
            words.append((mine.step, f"{ratios.pop():g} times"))
        else:
            differ = sorted(
                n for n in b if a.get(n) is None or b[n] is None or not _same(a[n], b[n])
            )
            what = (
                "all different" if len(differ) == len(b) else "different for " + ", ".join(differ)
            )
            words.append((mine.step, what))
    return words, first_diff


def grads_sentence(run: LoopRun):
    """Say how the loop's gradients compare with the fixed loop's over all steps it ran."""
    words, first_diff = compare_grads(run.steps, run.fix.steps)
    if not words:
        return None
    if first_diff is None:
        return f"Every parameter's gradient equals the fixed loop's at {'the' if len(words) == 1 else 'each of the'} {plural(len(words), 'step')} it ran."
    groups = []
    for step, what in words:
        if groups and groups[-1][2] == what and groups[-1][1] == step - 1:
            groups[-1][1] = step
        else:
            groups.append([step, step, what])
    parts = "; ".join(
        f"step {a}: {what}" if a == b else f"steps {a} to {b}: {what}" for a, b, what in groups
    )
    text = f"Gradients compared with the fixed loop's, step by step: {parts}."
    depths = [max(s.depths) for s in run.steps]
    if first_diff > 1 and len(depths) > 1 and depths[-1] > depths[0]:
        text += (
            f" Step 1 is equal; from step {first_diff} this loop backpropagates into earlier steps"
            " (its graph depth grows), which the fix cuts off: truncating the history changes"
            " what is learned."
        )
    elif first_diff == 1 and words[0][1].endswith("times"):
        text += " After step 1 the parameters differ too, since each step's update used those gradients."
    return text


def tempting_sentence(run: LoopRun):
    """Say what the tempting fix did to training, from its captured gradients."""
    if run.tempting is None:
        return None
    fixed = {g.name for s in run.fix.steps for g in s.grads if g.norm is not None}
    never = sorted(
        name
        for name in fixed
        if all(g.norm is None for s in run.tempting.steps for g in s.grads if g.name == name)
    )
    steps = len(run.tempting.steps)
    if not never:
        return (
            f"Detaching it instead ran {plural(steps, 'step')}, every parameter getting a gradient."
        )
    return (
        f"Detaching it instead ran all {steps} steps without an error, but {', '.join(never)}"
        f" got no gradient at any step (its .grad stayed None): it silently stopped training."
    )


def verdict(run: LoopRun):
    """Derive the verdict from the captured facts."""
    if run.raised is not None:
        if INPLACE in run.raised.message:
            return Verdict(
                "inplace",
                f"Raises a different error on step {run.raised_step}, {_where(run)}:"
                f" {first_clause(run.raised.message)}.",
            )
        return Verdict(
            "raises",
            f"Raises on step {run.raised_step}, {_where(run)}: {first_clause(run.raised.message)}.",
        )
    costs = costs_of(run)
    steps = len(run.steps)
    if costs:
        return Verdict("costs", f"Runs all {steps} steps, but " + "; ".join(costs) + ".")
    return Verdict("runs", f"Runs all {steps} steps, with the same gradients as the fixed loop.")


def costs_of(run: LoopRun):
    """List what a loop that runs costs or changes compared with its fix."""
    costs = []
    depths = [max(s.depths) for s in run.steps]
    if len(depths) > 1 and depths[-1] > depths[0]:
        costs.append(f"its graph deepens every step (depth {depths[0]} to {depths[-1]})")
    saved = [s.saved for s in run.steps]
    fixed_saved = [s.saved for s in run.fix.steps]
    if len(saved) > 1 and saved[-1] > saved[0]:
        costs.append(f"saved tensors pile up ({saved[0]} to {saved[-1]} alive after a step)")
    elif saved and max(saved) > max(fixed_saved):
        costs.append(
            f"it keeps {plural(max(saved), 'saved tensor')} alive after each step, where the fixed loop keeps {max(fixed_saved)}"
        )
    words, first_diff = compare_grads(run.steps, run.fix.steps)
    if first_diff == 1:
        what = words[0][1]
        if what.endswith("times"):
            costs.append(f"its step-1 gradients are {what} the fixed loop's")
        else:
            costs.append(
                f"its step-1 gradients differ from the fixed loop's ({what.replace('different for ', 'for ')})"
            )
    elif first_diff is not None:
        costs.append(f"from step {first_diff} it learns something other than the fixed loop")
    return tuple(costs)


def _and(items):
    """'a', 'a and b', 'a, b and c'."""
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def steps_sentence(steps: tuple[Step, ...]):
    """Say what completed steps did: graph depth per call, saved tensors, optimizer steps."""
    every = " at every step" if len(steps) > 1 else ""
    if len({s.depths for s in steps}) == 1:
        count = len(steps[0].depths)
        per_call = f" for its {count} backward calls" if count > 1 else ""
        depth = f"graph depth {_and(steps[0].depths)}{per_call}{every}"
    elif all(len(s.depths) == 1 for s in steps):
        depth = f"graph depth {_and(s.depths[0] for s in steps)}, step by step"
    else:
        depth = "graph depth by step: " + "; ".join(_and(s.depths) for s in steps)
    saved = [s.saved for s in steps]
    if not any(saved):
        kept = f"no saved tensor left alive after {'a step' if every else 'it'}"
    elif len(set(saved)) == 1:
        kept = (
            f"{plural(saved[0], 'saved tensor')} left alive after {'every step' if every else 'it'}"
        )
    else:
        kept = "saved tensors left alive after each step: " + ", ".join(map(str, saved))
    stepping = all(s.grads for s in steps)
    return (
        f"ran {plural(len(steps), 'step')}{', the optimizer stepping' if stepping else ''}"
        f"{' each time' if stepping and every else ''};"
        f" {depth}; {kept}"
    )


def fix_edits(key, fixed_key):
    """Name the expert's edits for a combination, from the answers its fix changes."""
    when, calls, reach, retain = key.split("-")
    edits = []
    if when == "saved":
        edits.append(EDITS[("when", "saved")])
    if reach != "nothing":
        edits.append(EDITS[("reach", reach)])
    if calls != "one":
        edits.append(EDITS[("calls", calls)])
    if retain == "retain":
        edits.append(EDITS[("retain", "retain")])
    return edits


def diff_lines(old, new):
    """A line diff of two sources as (kind, text) pairs: ' ', '-' or '+'."""
    lines = []
    for line in difflib.ndiff(old.splitlines(), new.splitlines()):
        if line[:1] in " -+":
            lines.append((line[:1], line[2:]))
    return lines


def encode_diff(lines, ref):
    """A diff as one string of string indices: '5' unchanged, '-20' removed, '+21' added."""
    return " ".join(("" if kind == " " else kind) + str(ref(text)) for kind, text in lines)


def section_of(run: LoopRun, kind):
    """The page section that explains a combination's main problem."""
    if kind == "inplace":
        return "inplace"
    if run.retain == "retain" and kind != "raises":
        return "retain"
    if run.when == "saved":
        return "saved"
    if run.when == "later":
        return "cause-2"
    return {"twice": "cause-1", "shared": "cause-3", "gan": "cause-4", "grad": "grad"}[run.calls]


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
        v = verdict(run)
        already = run.source == run.fix.source
        fix_text = (
            "This loop is already the fix."
            if already
            else "Fix: " + "; ".join(fix_edits(key, run.fix.key)) + "."
        )
        where = anomaly = message = None
        if run.raised is not None:
            where = f"Step {run.raised_step}, line {run.raised.line}: {run.raised.code}"
            message = f"{run.raised.type}: {run.raised.message}"
        if run.anomaly is not None:
            anomaly = f"{run.anomaly.node}, created at line {run.anomaly.line}: {run.anomaly.code}"
        outcome = f"This loop {steps_sentence(run.steps)}." if run.steps else None
        results[key] = {
            "kind": v.kind,
            "headline": ref(v.headline),
            "where": ref(where),
            "message": ref(message),
            "anomaly": ref(anomaly),
            "outcome": ref(outcome),
            "grads": ref(grads_sentence(run)),
            "fix": ref(fix_text),
            "tempting": ref(tempting_sentence(run)),
            "diff": encode_diff(diff_lines(run.source, run.fix.source), ref),
            "fixed": ref(f"With the fix, the loop {steps_sentence(run.fix.steps)}."),
            "section": section_of(run, v.kind),
        }
        rows.append(
            {"key": key, "fragment": fragment(key), "verdict": v, "fix": fix_text, "run": run}
        )
    data = {"strings": strings, "results": results, "names": list(NAMES)}
    return data, rows
