"""The checker's data: for each answer combination, what its loops did, in words.

A combination is captured as a main loop and its variants (repro/loop.py): other shapes of the
reader's code that the four answers cannot tell apart, and the non-fixes readers try. Every
sentence that states what a loop did is derived from its captured runs by the same rules for
all loops; each phrase that describes a loop's code is checked against that loop's source. The
page's script only looks the result up.
"""

import difflib
from dataclasses import dataclass

from .errors import ClaimError
from .snapshot import LoopRun

OTHER = ("other", "None of these fits")
HERE = "backtwice/checker.py"

QUESTIONS = (
    (
        "when",
        "When does it raise?",
        "",
        (
            ("first", "On the first step"),
            ("later", "On a later step"),
            ("saved", "Reading a saved tensor (grad_fn._saved_*, a graph viewer)"),
            OTHER,
        ),
    ),
    (
        "calls",
        "What backward calls does a step make?",
        "Count backward() and autograd.grad() calls, in helpers too.",
        (
            ("one", "One backward()"),
            ("twice", "backward() twice on one loss (a re-run notebook cell too)"),
            ("shared", "backward() on two losses from one forward pass"),
            ("gan", "A GAN, D's backward first (WGAN-GP too)"),
            ("gfirst", "A GAN, G's backward first"),
            ("grad", "autograd.grad(), then backward() (a gradient penalty, meta-learning)"),
            ("dist", "Two losses from one torch.distributions object"),
            ("ac", "Actor-critic losses on one trunk"),
            OTHER,
        ),
    ),
    (
        "reach",
        "What does the forward pass reuse from an earlier step?",
        "Anything with a grad_fn from an earlier step or before the loop.",
        (
            ("nothing", "Nothing: fresh data each step"),
            (
                "rnn",
                "State carried over, not detached (an RNN state, a baseline, unrolled weights)",
            ),
            ("lstm", "An LSTM state with h detached, c not"),
            ("lstm-both", "An LSTM state (h, c), neither detached"),
            ("before", "A tensor computed before the loop from trained weights"),
            ("frozen", "Frozen-model features computed before the loop"),
            ("total", "A running loss total, with backward() on it"),
            ("kept", "Past outputs the loss trains through again (replay)"),
            ("bank", "A tensor kept in a list or on self (memory bank, self.prev, a cached bias)"),
            OTHER,
        ),
    ),
    (
        "retain",
        "Did you add retain_graph=True or create_graph=True?",
        "Count one the message made you add, and one a gradient penalty or meta-learning needs.",
        (
            ("none", "Neither"),
            ("retain", "retain_graph=True on the first call"),
            ("create", "create_graph=True on autograd.grad()"),
            OTHER,
        ),
    ),
)

NAMES = tuple(q[0] for q in QUESTIONS)

# Each preset: its name, the combination that is that case, and the page section explaining it.
PRESETS = (
    ("A notebook cell run again", "later-twice-nothing-none", "cause-1"),
    ("nn.LSTM over sequences", "later-one-lstm-both-none", "cause-2"),
    ("WGAN-GP", "first-gan-nothing-create", "cause-4"),
    ("Saved tensors read after backward", "saved-one-nothing-none", "saved"),
    ("retain_graph=True, then an in-place error", "later-one-rnn-retain", "inplace"),
    ("REINFORCE with a moving-average baseline", "later-one-rnn-none", "cause-2"),
    ("Unrolled meta-learning", "later-grad-rnn-create", "cause-2"),
    ("L-BFGS with a closure", "first-one-nothing-none", "cause-1"),
)

# How a variant's code differs, as a condition on the outcome ("raises ... <condition>"), and a
# check on the variant's source that the condition describes it.
SHAPES = {
    "step": ("with opt.step() between the two calls", lambda s: _between(s, "opt.step()")),
    "cell": (
        "when a notebook cell with backward() is run again",
        lambda s: "# cell 2, run twice" in s,
    ),
    "seq": (
        "for an nn.GRU or nn.LSTM over a sequence",
        lambda s: "nn.GRU(" in s or "nn.LSTM(" in s,
    ),
    "reuse": (
        "when G's loss reuses D's output from the D step",
        lambda s: "g_loss = bce(out_fake," in s,
    ),
    "wgan": (
        "for a WGAN-GP whose critic's loss uses the fake batch without detach()",
        lambda s: "create_graph=True" in s and "D(fake).mean() - D(real)" in s,
    ),
    "attr": ("for a past output kept on self (self.prev = y)", lambda s: "self.prev = y " in s),
    "cache": (
        "for a tensor cached on self from weights that train (self.bias)",
        lambda s: "self.bias = self.rel(" in s,
    ),
    "same": (
        "for a tensor set on self and read in the same step (self.weights)",
        lambda s: "self.weights = " in s and "* model.weights" in s,
    ),
    "baseline": (
        "for a moving-average baseline carried across episodes (REINFORCE)",
        lambda s: "baseline = 0.9 * baseline + 0.1 * reward.mean()  #" in s,
    ),
    "meta": (
        "for weights a learned rule updates, unrolled across steps (meta-learning)",
        lambda s: "create_graph=True" in s and "w = w - learner(g)" in s,
    ),
    "closure": (
        "for an L-BFGS closure around a loss computed outside it",
        lambda s: "opt.step(closure)" in s and "    loss = " in s,
    ),
}
# The main loop's condition, by its first variant.
MAIN = {
    "step": (
        "if no optimizer step() runs between the two calls",
        lambda s: not _between(s, ".step()"),
    ),
    "cell": ("with both calls in one step", lambda s: "# cell" not in s),
    "seq": ("for a cell (nn.RNNCell, nn.LSTMCell) called once per step", lambda s: "Cell(" in s),
    "reuse": ("when G's loss calls D(fake) again", lambda s: "g_loss = bce(D(fake)," in s),
    "wgan": ("for a gradient penalty alone", lambda s: "G(z)" not in s),
    "attr": (
        "for a past output kept in a list (bank.append(feat))",
        lambda s: "bank.append(feat)" in s,
    ),
}
DEAD_ENDS = {
    "zerograd": ("opt.zero_grad() between the two calls", "opt.zero_grad()  # clear"),
    "nograd": ("torch.no_grad() around the second call", "with torch.no_grad():"),
    "nodetach": ("h.detach() without assigning it", "    h.detach()"),
    "fake": (
        "loss.detach().requires_grad_().backward()",
        "loss.detach().requires_grad_().backward()",
    ),
    "tuple": ("hidden = hidden.detach() on the (h, c) tuple", "hidden = hidden.detach()"),
    "detach": ("Detaching the tensor instead", ").detach()"),
    "sum": (
        "Summing the two losses, advantage not detached",
        "(actor_loss + critic_loss).backward()",
    ),
}

# The order variants are shown in: shapes, then dead ends, each as listed above.
ORDER = (*SHAPES, *DEAD_ENDS)

# The expert's edit for each answer or variant the fix changes, and code the fix must hold
# (or, for a leading '!', must not).
EDITS = {
    ("calls", "twice"): ("drop the second backward() call", "loss.backward()"),
    ("calls", "shared"): ("add the losses and call backward() once on the sum", ").backward()"),
    ("calls", "gan"): (
        "give D's loss D(fake.detach()); G's loss makes its own D(fake) call",
        "D(fake.detach())",
    ),
    ("calls", "gfirst"): ("give D's loss D(fake.detach())", "D(fake.detach())"),
    ("calls", "grad"): ("pass create_graph=True to autograd.grad", "create_graph=True"),
    ("calls", "dist"): (
        "add the two losses and call backward() once on the sum",
        "(policy_loss + entropy_loss).backward()",
    ),
    ("calls", "ac"): (
        "use advantage.detach() in the actor's loss, then call backward() once on the sum",
        "advantage.detach()",
    ),
    ("reach", "rnn"): ("detach the hidden state at the step boundary", "h = h.detach()"),
    ("reach", "lstm"): ("detach both h and c at the step boundary", "c.detach()"),
    ("reach", "lstm-both"): (
        "detach both tensors of the (h, c) tuple, a line that works on tuples",
        "hidden = tuple(t.detach() for t in hidden)",
    ),
    ("reach", "before"): (
        "compute the tensor inside the loop, from the weights as they are now",
        "    weight = encoder.weight",
    ),
    ("reach", "frozen"): (
        "compute the frozen model's features under torch.no_grad()",
        "with torch.no_grad():",
    ),
    ("reach", "total"): (
        "call backward() on the step's loss and add loss.item() to the total",
        "running_loss += loss.item()",
    ),
    ("reach", "kept"): (
        "keep the inputs, not the outputs, and run the forward pass on them each step",
        "replay.append(x)",
    ),
    ("reach", "bank"): ("store the detached tensor: bank.append(feat.detach())", "feat.detach()"),
    ("when", "saved"): ("read what you need before backward() frees it", "_saved_"),
    ("retain", "retain"): ("drop retain_graph=True", "!retain_graph=True"),
    ("variant", "cell"): ("run the forward pass in the same cell as backward()", "    feat ="),
    ("variant", "reuse"): (
        "give D's loss D(fake.detach()); G needs a new D(fake) call, not D's output reused",
        "g_loss = bce(D(fake),",
    ),
    ("variant", "wgan"): (
        "use fake.detach() in the critic's step, in its loss and its penalty's mix",
        "D(fake.detach())",
    ),
    ("variant", "attr"): ("keep the detached output: self.prev = y.detach()", "y.detach()"),
    ("variant", "cache"): (
        "compute it in each forward (detached, those weights would stop training)",
        "        bias = self.rel(",
    ),
    ("variant", "baseline"): (
        "keep the average as a number: 0.1 * reward.mean().item()",
        "reward.mean().item()",
    ),
    ("variant", "meta"): (
        "start each unroll from w.detach().requires_grad_()",
        "w = w.detach().requires_grad_()",
    ),
    ("variant", "closure"): ("compute the loss inside the closure", "        loss = "),
}

# For a main loop that is already the usual fix: what to check next.
# (the main loop, as the reader would call it; the question to ask next)
NEXT = {
    "first-grad-nothing-create": (
        "A gradient penalty with create_graph=True, written the usual way,",
        "is the fake batch detached in the critic step?",
    ),
}

INPLACE = "modified by an inplace operation"
THIS = "Trying to backward through the graph a second time"
CONTEXT = 1  # lines of context around each change in a diff (one: page weight)


def _between(source, call):
    """Whether a line with `call` sits between the step's first and last backward call."""
    lines = source.splitlines()
    calls = [i for i, line in enumerate(lines) if ".backward(" in line]
    return len(calls) > 1 and any(call in line for line in lines[calls[0] + 1 : calls[-1]])


def split_key(key):
    """A loop key's answers and variant: ('later', 'one', 'lstm-both', 'none'), ''."""
    key, _, variant = key.partition("~")
    when, calls, rest = key.split("-", 2)
    reach, retain = rest.rsplit("-", 1)
    return (when, calls, reach, retain), variant


def fragment(key):
    """The URL fragment that selects a combination."""
    answers, _ = split_key(key)
    return "&".join(f"{name}={value}" for name, value in zip(NAMES, answers, strict=True))


def call_of(code):
    """The call a source line makes, without its comment: 'loss.backward()'."""
    return code.split("  #")[0].strip()


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


@dataclass(frozen=True)
class Verdict:
    """What one loop did, in words."""

    kind: str
    """'raises' (this error), 'inplace' (the in-place error), 'error' (another), 'costs', 'runs'."""
    parts: tuple[str, ...]
    """A clause in pieces that recur across loops: ('raises on step 2 at loss.backward(): ',
    'Trying to backward through the graph a second time'); ('runs all 4 steps', ', but ', costs)."""

    @property
    def outcome(self):
        """The clause: 'raises on step 2 at loss.backward(): Trying to backward ...'."""
        return "".join(self.parts)

    @property
    def short(self):
        """The clause without what a loop that runs costs."""
        return self.parts[0] if self.kind == "costs" else self.outcome

    @property
    def headline(self):
        """The clause as a sentence."""
        return self.outcome[0].upper() + self.outcome[1:] + "."


def capital(parts):
    """The pieces with the first one capitalised."""
    parts = [p for p in parts if p]
    return [parts[0][0].upper() + parts[0][1:], *parts[1:]]


# Whose backward a call is, by the tensor it is called on: the reader's code names these
# differently, but the role carries over.
ROLES = {
    "loss_main": "the main loss's backward()",
    "loss_aux": "the auxiliary loss's backward()",
    "d_loss": "D's backward()",
    "g_loss": "G's backward()",
    "critic_loss": "the critic's backward()",
    "actor_loss": "the actor's backward()",
    "policy_loss": "the policy loss's backward()",
    "entropy_loss": "the entropy term's backward()",
    "running_loss": "the backward() on your running total",
}
ORDINALS = ("first", "second", "third", "fourth")


def _calls_before(run):
    """The backward and autograd.grad calls of the loop's source up to the line that raised."""
    lines = run.source.splitlines()[: run.raised.line]
    return [call_of(line) for line in lines if ".backward(" in line or "autograd.grad(" in line]


def _whose(run, code):
    """The raising call in the reader's terms: 'your second backward()', "the critic's ..."."""
    receiver = code.split(".backward(")[0]
    if receiver in ROLES:
        return ROLES[receiver]
    if "autograd.grad(" in code:
        return "your autograd.grad() call"
    if "# cell 2, run twice" in run.source:
        return "the backward() in your re-run cell"
    if "opt.step(closure)" in run.source:
        return "the backward() in your closure, called again by L-BFGS"
    calls = _calls_before(run)
    if any("autograd.grad(" in c for c in calls[:-1]):
        return "your backward() after autograd.grad()"
    if len([line for line in run.source.splitlines() if ".backward(" in line]) == 1:
        return "your backward()"
    return f"your {ORDINALS[len(calls) - 1]} backward()"


def _where(run):
    """Where a loop raised, by the call's role, with the loop's line as the example."""
    code = call_of(run.raised.code or "")
    if "_saved_" in code:
        return f"when your code reads a saved tensor after backward() (e.g. {code})"
    if ".backward(" in code or "autograd.grad(" in code:
        return f"at {_whose(run, code)} (e.g. {code})"
    return f"at {code}"


def never_trained(run: LoopRun):
    """Parameters the fix trains that got no gradient at any step of this run."""
    fixed = {g.name for s in run.fix.steps for g in s.grads if g.norm is not None}
    return sorted(
        name
        for name in fixed
        if all(g.norm is None for s in run.steps for g in s.grads if g.name == name)
    )


def dropped_by_fix(run: LoopRun):
    """Parameters the reader's loop trained (a gradient at a step it completed) that the fix
    leaves without a gradient at some step: a fix that runs by training less is no fix."""
    trained = {g.name for s in run.steps for g in s.grads if g.norm is not None}
    return sorted(
        name
        for name in trained
        if any(
            all(g.norm is None for g in s.grads if g.name == name)
            or name not in {g.name for g in s.grads}
            for s in run.fix.steps
        )
    )


def costs_of(run: LoopRun):
    """List, in the reader's terms, what a loop that runs costs or changes compared with its fix."""
    costs = []
    depths = [max(s.depths) for s in run.steps]
    if len(depths) > 2 and all(b > a for a, b in zip(depths, depths[1:], strict=False)):
        costs.append("each step's backward walks back through all earlier steps")
    saved = [s.saved for s in run.steps]
    fixed_saved = [s.saved for s in run.fix.steps]
    if len(saved) > 1 and saved[-1] > saved[0]:
        costs.append("the memory it keeps for earlier steps' graphs grows every step")
    elif saved and max(saved) > max(fixed_saved):
        costs.append("it keeps graph memory alive between steps that the fix frees")
    never = never_trained(run)
    if never and len(never) == len({g.name for g in run.fix.steps[0].grads}):
        costs.append("no parameter got a gradient at any step (every .grad stayed None)")
        return tuple(costs)
    if never:
        costs.append(f"{', '.join(never)} got no gradient at any step (its .grad stayed None)")
        return tuple(costs)
    words, first_diff = compare_grads(run.steps, run.fix.steps)
    if first_diff == 1:
        what = words[0][1]
        if what.endswith("times"):
            costs.append(f"its step-1 gradients are {what} the fix's")
        else:
            costs.append(
                f"its gradients differ from the fix's from step 1 ({what.replace('different for ', 'for ')})"
            )
    elif first_diff is not None:
        costs.append(f"from step {first_diff} it learns something other than the fix")
    return tuple(costs)


def verdict(run: LoopRun):
    """Derive what a loop did from its captured facts."""
    if run.raised is not None:
        where = _where(run)
        if INPLACE in run.raised.message:
            kind, what = "inplace", first_clause(run.raised.message)
        elif run.raised.message.startswith(THIS):
            kind, what = "raises", first_clause(run.raised.message)
        else:
            kind, what = "error", f"{run.raised.type}: {run.raised.message}"
        return Verdict(kind, (f"raises on step {run.raised_step} {where}: ", what))
    steps = len(run.steps)
    costs = costs_of(run)
    ran = {1: "runs", 2: "runs both steps"}.get(steps, f"runs all {steps} steps")
    if costs:
        return Verdict("costs", (ran, ", but " + "; ".join(costs)))
    return Verdict("runs", (ran,))


def fix_edits(run: LoopRun, variant):
    """Name the expert's edits for a loop, from the answers and variant its fix changes."""
    picked = []
    # the main loop of a notebook cell run again (answered as a later step), of an unrolled
    # meta-learning step, of an L-BFGS closure
    variant = {
        ("later", "twice"): "cell",
        ("later", "grad"): "meta",
        ("first", "one"): "closure",
    }.get((run.when, run.calls), variant)
    if run.when == "saved":
        picked.append(("when", "saved"))
    if (run.calls, run.retain) == ("gan", "create"):
        picked.append(("variant", "wgan"))
    elif variant in ("reuse", "wgan", "cell", "attr", "cache", "baseline", "meta", "closure"):
        picked.append(("variant", variant))
    elif run.reach != "nothing":
        picked.append(("reach", run.reach))
    elif run.calls not in ("one",) and (run.calls, run.retain) != ("grad", "create"):
        picked.append(("calls", run.calls))
    if run.retain == "retain":
        picked.append(("retain", "retain"))
    for which in picked:
        text, code = EDITS[which]
        present = code.lstrip("!") in run.fix.source
        if present == code.startswith("!"):
            raise ClaimError(
                HERE,
                f"checker loop '{run.fix.key}': the edit {which}",
                f"its fixed loop {'holds' if present else 'lacks'} {code.lstrip('!')!r}",
                text,
                "rewrite EDITS in backtwice/checker.py",
            )
    return [EDITS[which][0] for which in picked]


def diff_hunks(old, new, context=CONTEXT):
    """The changed lines of two sources as (kind, text) pairs: ' ', '-', '+', and ('@', '')
    between hunks. A hunk that adds or removes lines has `context` lines around it; one that
    only rewrites lines has none (its removed lines say where it is: page weight)."""
    lines = []
    a, b = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        if lines:
            lines.append(("@", ""))
        if all(op[0] in ("equal", "replace") for op in group):
            group = [op for op in group if op not in (group[0], group[-1]) or op[0] != "equal"]
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [(" ", line) for line in a[i1:i2]]
                continue
            lines += [("-", line) for line in a[i1:i2]]
            lines += [("+", line) for line in b[j1:j2]]
    return lines


def encode_diff(lines, ref):
    """A diff as one string: each line its sign ('=' unchanged, '-' removed, '+' added) and its
    string's index, left out when it is the line before's index plus one (strings are numbered
    in first use, so a diff's new lines follow on: page weight); '@' a gap between hunks."""
    out, last = [], -1
    for kind, text in lines:
        if kind == "@":
            out.append("@")
            continue
        index = ref(text)
        out.append(("=" if kind == " " else kind) + ("" if index == last + 1 else str(index)))
        last = index
    return "".join(out)


def section_of(run: LoopRun, kind):
    """The page section that explains a combination's main problem."""
    if kind == "inplace":
        return "inplace"
    if run.retain == "retain" and kind != "raises":
        return "retain"
    if run.when == "saved":
        return "saved"
    if run.calls == "twice" or (run.when, run.calls) == ("first", "one"):
        return "cause-1"
    if run.when == "later":
        return "cause-2"
    if run.calls in ("gan", "gfirst"):
        return "cause-4"
    return {"twice": "cause-1", "grad": "grad"}.get(run.calls, "cause-3")


# What a loop did, in a few words, for a headline over several shapes.
KIND_WORDS = {
    "raises": "raises this error",
    "inplace": "fails with the in-place error",
    "error": "fails with another error first",
    "costs": "runs at a cost",
    "runs": "runs",
}


def headline_of(verdicts):
    """One sentence: a single loop's outcome, or what the shapes below it do, in short."""
    if len(verdicts) == 1:
        v = verdicts[0]
        return (
            "".join(capital([v.parts[0], ", at a cost (below)."]))
            if v.kind == "costs"
            else v.headline
        )
    words = list(dict.fromkeys(KIND_WORDS[v.kind] for v in verdicts))
    if len(words) == 1:
        return capital([words[0]])[0] + " in each shape below."
    listed = ", ".join(words[:-1]) + " or " + words[-1]
    return f"Depending on its shape (below), your code {listed}."


def _checked(key, phrase, check, source):
    """The phrase, once its check holds for the loop's source."""
    if not check(source):
        raise ClaimError(
            HERE,
            f"checker loop '{key}'",
            "its source does not match the phrase",
            phrase,
            "rewrite SHAPES, MAIN or DEAD_ENDS in backtwice/checker.py",
        )
    return phrase


def fix_pieces(edits):
    """'Fix: ', each edit, '; ' between them, '.': pieces that recur across loops."""
    pieces = ["Fix: "]
    for edit in edits:
        pieces += ["; " if len(pieces) > 1 else "", edit]
    return [*pieces, "."]


def fixed_sentence(run: LoopRun):
    """What the fixed loop did, from its steps (the capture stops if a fix raises)."""
    every = all(g.norm is not None for s in run.fix.steps for g in s.grads)
    steps = len(run.fix.steps)
    return f"With the fix it ran {'both' if steps == 2 else f'all {steps}'} steps" + (
        ", every parameter getting a gradient at every step." if every else "."
    )


# The answers in a few words each, for the table of loops.
SHORT = {
    "first": "first step",
    "later": "later step",
    "saved": "saved tensor read",
    "one": "one backward",
    "twice": "same loss twice",
    "shared": "two losses",
    "gan": "GAN, D first",
    "gfirst": "GAN, G first",
    "grad": "autograd.grad",
    "dist": "distributions",
    "ac": "actor-critic",
    "rnn": "state carried",
    "lstm": "LSTM, c kept",
    "lstm-both": "LSTM (h, c) kept",
    "before": "tensor from trained weights",
    "frozen": "frozen features",
    "total": "loss total",
    "kept": "outputs kept",
    "bank": "memory bank",
    "retain": "retain_graph",
    "create": "create_graph",
}


def label_of(key):
    """A combination's answers in words, for the table of loops; 'nothing reused' and 'no
    retain' go without saying (page weight)."""
    return ", ".join(SHORT[a] for a in split_key(key)[0] if a not in ("nothing", "none"))


# The script's data holds each result, block and tried change as a list in this field order, not
# an object (page weight: 36 results repeat every key); static/checker.js reads the same order.
RESULT = ("n", "s", "b", "t")  # note, section, blocks, tried changes
# The script writes what every sentence of a kind has: a label's capital and its ':', a verdict's
# capital and its '.', 'Fix: ' and '; ' between a fix's edits and its '.', a tried change's ':'.
# A block holds no exact text: its headline or verdict quotes the message's first clause, the loop's
# tensor shapes are not the reader's, and the page's message is in full under "The error".
BLOCK = ("k", "l", "v", "f", "d", "x")  # kind, label, verdict, fix, diff, fixed
TRIED = ("l", "v", "d")  # label, verdict, diff


def packed(result):
    """A result as the script reads it: lists in RESULT, BLOCK and TRIED order."""
    return [
        result["n"],
        result["s"],
        [[b[name] for name in BLOCK] for b in result["b"]],
        [[t[name] for name in TRIED] for t in result["t"]],
    ]


def unpacked(row):
    """A packed result with its fields named again, and its kind as the script works it out."""
    result = dict(zip(RESULT, row, strict=True))
    result["b"] = [dict(zip(BLOCK, b, strict=True)) for b in result["b"]]
    result["t"] = [dict(zip(TRIED, t, strict=True)) for t in result["t"]]
    kinds = {b["k"] for b in result["b"]}
    result["kind"] = kinds.pop() if len(kinds) == 1 else "mixed"
    return result


def page_data(data):
    """The data as the page sends it: the results in the order of the table of loops (sorted by
    key), without their keys, which the script reads from the table's row ids (page weight)."""
    return {**data, "results": [data["results"][key] for key in sorted(data["results"])]}


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

    groups = {}
    for key in loops:
        groups.setdefault(key.partition("~")[0], []).append(key)

    def refs(pieces):
        """Pieces of one sentence as string indices, joined without separators when shown."""
        return " ".join(str(ref(p)) for p in pieces if p)

    results = {}
    rows = []
    for combo in sorted(groups):
        keys = [combo] + sorted(
            (k for k in groups[combo] if k != combo), key=lambda k: ORDER.index(k.partition("~")[2])
        )
        main = loops[combo]
        shapes = [k for k in keys[1:] if k.partition("~")[2] in SHAPES]
        dead = [k for k in keys[1:] if k.partition("~")[2] in DEAD_ENDS]
        conds, blocks, kinds = [], [], set()
        for key in [combo, *shapes]:
            run, variant = loops[key], key.partition("~")[2]
            v = verdict(run)
            kinds.add(v.kind)
            cond = None
            if variant:
                cond = _checked(key, *SHAPES[variant], run.source)
            elif shapes:
                cond = _checked(key, *MAIN[shapes[0].partition("~")[2]], run.source)
            conds.append((cond, v))
            edits = fix_edits(run, variant) if run.source != run.fix.source else []
            dropped = dropped_by_fix(run) if edits else []
            if dropped:
                raise ClaimError(
                    HERE,
                    f"checker loop '{key}'",
                    f"its fix leaves {', '.join(dropped)} without a gradient at a step",
                    "Fix: ...",
                    "change fix() in repro/loop.py so the fix trains what the loop trained",
                )
            if run.raised is not None and not edits:
                raise ClaimError(
                    HERE,
                    f"checker loop '{key}'",
                    "it raises, and its fix is the same code",
                    "Fix: ...",
                    "change fix() in repro/loop.py",
                )
            block = {
                "l": refs([cond]) if cond else "",
                "k": v.kind,
                # one sentence per variant; a single loop's is the headline, unless it runs at a cost
                # a shape that runs as the usual code does: say so, it is not the cause
                "v": refs([*v.parts, ", nothing to fix" if v.kind == "runs" and not edits else ""])
                if cond or v.kind == "costs"
                else "",
                "f": refs(edits),
                "d": encode_diff(diff_hunks(run.source, run.fix.source), ref) if edits else "",
                "x": ref(fixed_sentence(run) if edits else None),
            }
            blocks.append(block)
        headline = headline_of([v for _, v in conds])
        note = None
        if main.raised is None and main.source == main.fix.source:
            raising = [k for k in shapes if verdict(loops[k]).kind == "raises"]
            if combo not in NEXT or not raising:
                raise ClaimError(
                    HERE,
                    f"checker combination '{combo}'",
                    "its main loop is the usual fix and no variant raises this error",
                    "This loop does not raise this error.",
                    "add a raising variant in repro/loop.py and a NEXT entry in backtwice/checker.py",
                )
            note = (
                f"{NEXT[combo][0]} {verdict(main).outcome}."
                f" Check next: {NEXT[combo][1]} The variant below raises."
            )
        tried = []
        for key in dead:
            run, variant = loops[key], key.partition("~")[2]
            label = _checked(
                key, DEAD_ENDS[variant][0], lambda s, v=variant: DEAD_ENDS[v][1] in s, run.source
            )
            v = verdict(run)
            still = v.kind == "raises" and main.raised and main.raised.message == run.raised.message
            tried.append(
                {
                    "l": ref(label),
                    "v": refs(["still " if still else "", *v.parts]),
                    "d": encode_diff(diff_hunks(main.source, run.source, 1), ref),
                }
            )
        kind = kinds.pop() if len(kinds) == 1 else "mixed"
        results[combo] = packed(
            {"n": ref(note), "s": section_of(main, verdict(main).kind), "b": blocks, "t": tried}
        )
        main_fix = "".join(fix_pieces(fix_edits(main, ""))) if blocks[0]["f"] else None
        rows.append(
            {
                "key": combo,
                "label": label_of(combo),
                "verdict": {"kind": kind, "headline": headline},
                "fix": main_fix or "None: this is the usual code.",
                "count": len(keys),
            }
        )
    # The headline is not in the data: the page's table of loops holds it, and the script reads it
    # from there, so the text is sent once.
    data = {"strings": strings, "results": results, "names": list(NAMES)}
    return data, rows
