"""Sentences on the page that state behaviour, each tied to a check on the snapshot.

A check returns the figures its sentence quotes, or raises Missing/False-claim with the reason.
If a torch upgrade makes a sentence false, the build stops and names the section and check.
"""

from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup

from . import facts as f
from .errors import ClaimError


class Untrue(Exception):
    """The snapshot contradicts the sentence."""


@dataclass(frozen=True)
class Claim:
    """A sentence and the check that makes it true."""

    id: str
    """How templates refer to it: claims['id']."""
    section: str
    """The page section the sentence stands in."""
    text: str
    """The sentence, trusted HTML with {placeholders} for the check's figures."""
    check: Callable
    """Takes the snapshot, returns the figures for the placeholders or raises Untrue/Missing."""


def require(condition, reason):
    """Raise Untrue with the reason unless the condition holds."""
    if not condition:
        raise Untrue(reason)


def fmt(values):
    """Format a list of floats the way the page prints them."""
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"


def _raises(snapshot, scenario):
    raised = f.run(snapshot, scenario).raised
    require(raised is not None, f"scenario '{scenario}' no longer raises")
    return raised


def _runs(snapshot, scenario):
    run = f.run(snapshot, scenario)
    require(run.raised is None, f"scenario '{scenario}' now raises")
    return run


def one_message(s):
    raising = [run.raised.message for run in s.scenarios.values() if run.raised is not None]
    require(raising, "no scenario raises")
    require(
        len(set(raising)) == 1, f"the raising scenarios give {len(set(raising))} different messages"
    )
    return {"count": len(raising), "total": len(s.scenarios)}


def second_backward_raises(s):
    raised = _raises(s, "c1_backward_twice")
    require(
        raised.code == "loss.backward()", f"it raised at {raised.code!r}, not at a backward call"
    )
    return {"line": raised.line}


def retained_grads_add(s):
    _runs(s, "c1_retain_then_backward")
    first = f.tensor(f.printed_one(s, "c1_retain_then_backward", "x.grad after the first call:"))
    second = f.tensor(f.printed_one(s, "c1_retain_then_backward", "x.grad after the second call:"))
    require(
        f.close([2 * v for v in first], second),
        f"x.grad went from {first} to {second}, not doubled",
    )
    return {"first": fmt(first), "second": fmt(second)}


def carried_raises_on_step_2(s):
    raised = _raises(s, "c2_no_detach")
    steps = [row[0] for row in f.printed(s, "c2_no_detach", "step")]
    require(
        steps and steps[-1] == 2, f"it raised on step {steps[-1] if steps else '?'}, not step 2"
    )
    return {"code": raised.code}


def _depths(s, scenario):
    return [row[2] for row in f.printed(s, scenario, "graph depth at step")]


def detached_depth_constant(s):
    _runs(s, "c2_detach")
    depths = _depths(s, "c2_detach")
    require(len(set(depths)) == 1, f"depths per step are {depths}, not constant")
    return {"depth": depths[0], "steps": len(depths)}


def retained_depth_grows_by_one(s):
    _runs(s, "c2_retain_graph")
    depths = _depths(s, "c2_retain_graph")
    steps = list(zip(depths, depths[1:], strict=False))
    require(
        steps and all(b - a == 1 for a, b in steps), f"depths per step are {depths}, not +1 a step"
    )
    return {"depths": ", ".join(map(str, depths))}


def recompute_matches_retain(s):
    _runs(s, "c2_recompute")
    kept = f.tensor(f.printed_one(s, "c2_retain_graph", "w.grad:"))
    fresh = f.tensor(f.printed_one(s, "c2_recompute", "w.grad:"))
    require(f.close(kept, fresh), f"w.grad is {kept} with retain_graph but {fresh} recomputed")
    return {"grad": f"{fresh[0]:.4f}"}


def second_loss_raises(s):
    raised = _raises(s, "c3_two_backwards")
    require(raised.code == "l2.backward()", f"it raised at {raised.code!r}, not at l2.backward()")
    return {}


def summed_equals_retained(s):
    _runs(s, "c3_summed")
    _runs(s, "c3_retain")
    summed = f.tensor(f.printed_one(s, "c3_summed", "x.grad:"))
    kept = f.tensor(f.printed_one(s, "c3_retain", "x.grad:"))
    require(f.close(summed, kept), f"x.grad is {summed} summed but {kept} retained")
    return {"grad": "[" + ", ".join(f"{v:.4f}" for v in summed) + "]"}


def summed_twice_raises(s):
    raised = _raises(s, "c3_summed_twice")
    return {"code": raised.code}


def gan_generator_raises(s):
    raised = _raises(s, "c4_gan_no_detach")
    require(
        raised.code == "g_loss.backward()",
        f"it raised at {raised.code!r}, not at g_loss.backward()",
    )
    anomaly = f.run(s, "c4_gan_no_detach").anomaly
    require(anomaly is not None, "anomaly mode names no node")
    return {"node": anomaly.node, "code": anomaly.code}


def gan_detach_isolates_g(s):
    _runs(s, "c4_gan_detach")
    before = f.printed_one(s, "c4_gan_detach", "G.weight.grad after the discriminator step:")
    after = f.printed_one(s, "c4_gan_detach", "G.weight.grad after the generator step:")
    require(before is None, f"the discriminator step left G.weight.grad = {before!r}")
    require(any(v != 0 for v in f.tensor(after)), "the generator step left G.weight.grad empty")
    return {}


def saved_read_after_backward_raises(s):
    names = ("saved_result", "saved_self_leaf", "saved_self_intermediate")
    reference = _raises(s, "c1_backward_twice").message
    for name in names:
        raised = _raises(s, name)
        require(raised.message == reference, f"'{name}' raises a different message")
        before = f.printed_one(s, name, "before backward:")
        require(
            isinstance(before, dict) and "tensor" in before,
            f"'{name}' read no tensor before backward",
        )
    return {"count": len(names)}


def grad_twice_raises(s):
    _raises(s, "grad_twice")
    _raises(s, "grad_then_backward")
    return {}


def grad_retain_equal(s):
    _runs(s, "grad_retain")
    first = f.tensor(f.printed_one(s, "grad_retain", "first:"))
    second = f.tensor(f.printed_one(s, "grad_retain", "second:"))
    require(f.close(first, second), f"the two calls gave {first} and {second}")
    return {"grad": fmt(first)}


def create_graph_second_derivative(s):
    _runs(s, "grad_create_graph")
    first = f.tensor(f.printed_one(s, "grad_create_graph", "first derivative:"))
    second = f.tensor(f.printed_one(s, "grad_create_graph", "second derivative:"))
    # d/dx x^3 = 3x^2 and d2/dx2 = 6x, so second = 6 * sqrt(first / 3), computed here independently.
    expected = [6 * (v / 3) ** 0.5 for v in first]
    require(f.close(second, expected), f"second derivative {second}, expected {expected}")
    return {"second": fmt(second)}


def _memory(s, retain):
    rows = f.pairs(s, "memory", "retain_graph")
    saved = [r for r in rows if r["retain_graph"] is retain and "saved tensors" in r]
    alive = [r for r in rows if r["retain_graph"] is retain and "alive after backward" in r]
    require(saved and alive, f"memory printed no counts for retain_graph={retain}")
    return saved[0], alive[0]


def memory_freed_or_kept(s):
    _runs(s, "memory")
    saved_f, alive_f = _memory(s, False)
    saved_t, alive_t = _memory(s, True)
    require(
        alive_f["alive after backward"] == 0, "saved tensors survived backward without retain_graph"
    )
    require(
        alive_t["alive after backward"] == saved_t["saved tensors"],
        "retain_graph=True lost some saved tensors",
    )
    return {
        "saved": saved_t["saved tensors"],
        "mib": f"{saved_t['bytes'] / 2**20:g}",
        "alive": alive_t["alive after backward"],
    }


CLAIMS = (
    Claim(
        "one_message",
        "error",
        "All {count} of this page's {total} scenarios that fail raise this one message, word for word.",
        one_message,
    ),
    Claim(
        "second_backward_raises",
        "cause-1",
        "The second <code>backward()</code> raises (line {line}); the first one ran and freed the saved tensors.",
        second_backward_raises,
    ),
    Claim(
        "retained_grads_add",
        "cause-1",
        "With <code>retain_graph=True</code> on the first call both calls run, and the gradients add up: <code>x.grad</code> goes from {first} to {second}.",
        retained_grads_add,
    ),
    Claim(
        "carried_raises_on_step_2",
        "cause-2",
        "Without a detach the loop raises on step 2, at <code>{code}</code>: the first step whose backward reaches into the previous step's graph.",
        carried_raises_on_step_2,
    ),
    Claim(
        "detached_depth_constant",
        "cause-2",
        "With <code>h = h.detach()</code> the graph depth stays at {depth} on all {steps} steps.",
        detached_depth_constant,
    ),
    Claim(
        "retained_depth_grows_by_one",
        "cause-2",
        "With <code>retain_graph=True</code> every step it runs, but the depth grows by one node per step ({depths}): each backward walks the whole history.",
        retained_depth_grows_by_one,
    ),
    Claim(
        "recompute_matches_retain",
        "cause-2",
        "Recomputing the forward pass from scratch each step gives the same <code>w.grad</code> ({grad}) without keeping any graph alive between steps.",
        recompute_matches_retain,
    ),
    Claim(
        "second_loss_raises",
        "cause-3",
        "The second loss's <code>backward()</code> raises, although it is a different loss: it shares <code>feat</code>, whose saved tensors the first call freed.",
        second_loss_raises,
    ),
    Claim(
        "summed_equals_retained",
        "cause-3",
        "Summing the losses gives the same <code>x.grad</code> as retaining the graph, to four decimals ({grad}), and walks the graph once instead of twice.",
        summed_equals_retained,
    ),
    Claim(
        "summed_twice_raises",
        "cause-3",
        "Summing does not help if the summed loss then gets two calls: <code>{code}</code> raises, which is cause 1 again.",
        summed_twice_raises,
    ),
    Claim(
        "gan_generator_raises",
        "cause-4",
        "The generator's <code>backward()</code> raises; anomaly mode blames <code>{node}</code>, created at <code>{code}</code>: the discriminator's backward already ran through G.",
        gan_generator_raises,
    ),
    Claim(
        "gan_detach_isolates_g",
        "cause-4",
        "With <code>fake.detach()</code> the discriminator step leaves <code>G.weight.grad</code> at <code>None</code>, and the generator step fills it.",
        gan_detach_isolates_g,
    ),
    Claim(
        "saved_read_after_backward_raises",
        "saved",
        "All {count} reads below return a tensor before backward and raise the same message after it, although no second backward ran.",
        saved_read_after_backward_raises,
    ),
    Claim(
        "grad_twice_raises",
        "grad",
        "A second <code>torch.autograd.grad</code> call raises, and so does <code>loss.backward()</code> after one.",
        grad_twice_raises,
    ),
    Claim(
        "grad_retain_equal",
        "grad",
        "With <code>retain_graph=True</code> on the first call, both calls return {grad}.",
        grad_retain_equal,
    ),
    Claim(
        "create_graph_second_derivative",
        "grad",
        "With <code>create_graph=True</code> the gradient has a graph of its own, and differentiating it again gives the second derivative {second}.",
        create_graph_second_derivative,
    ),
    Claim(
        "memory_freed_or_kept",
        "retain",
        "With <code>retain_graph=False</code> no saved tensor outlives <code>backward()</code>; with <code>True</code> all {alive} of {saved} ({mib} MiB) stay alive until the graph itself is dropped.",
        memory_freed_or_kept,
    ),
)


def evaluate(snapshot, path):
    """Check every claim on the snapshot and return each sentence as HTML, by id."""
    sentences = {}
    for claim in CLAIMS:
        try:
            values = claim.check(snapshot)
        except (Untrue, f.Missing) as exc:
            raise ClaimError(
                path,
                f"section '{claim.section}': the check '{claim.id}'",
                str(exc),
                Markup(claim.text).striptags(),
            ) from None
        sentences[claim.id] = Markup(claim.text).format(**values)
    return sentences
