"""Sentences on the page that state behaviour, each tied to a check on the snapshot.

A check returns the figures its sentence quotes, or raises Missing/False-claim with the reason.
If a torch upgrade makes a sentence false, the build stops and names the section and check.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup

from . import facts as f
from .checker import verdict
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


MAIN = "c1_backward_twice"
"""The scenario whose message is the page's message."""
INPLACE = "inplace_after_retain"
"""The scenario that shows the in-place error retain_graph=True leads to."""


def _code(text):
    return Markup("<code>{}</code>").format(text)


def two_triggers(s):
    backward = _raises(s, MAIN)
    read = _raises(s, "saved_tensors")
    require(read.message == backward.message, "reading a saved tensor raises another message")
    grad = _raises(s, "grad_twice")
    require(grad.message == backward.message, "a second autograd.grad raises another message")
    require("autograd.grad" in (grad.code or ""), f"grad_twice raised at {grad.code!r}")
    _runs(s, "nosave_twice")
    require("backward" in (backward.code or ""), f"{MAIN} raised at {backward.code!r}")
    require("_saved_" in (read.code or ""), f"saved_tensors raised at {read.code!r}")
    return {}


def second_backward_raises(s):
    raised = _raises(s, MAIN)
    require(
        raised.code == "loss.backward()", f"it raised at {raised.code!r}, not at a backward call"
    )
    return {}


def one_call_trains(s):
    _runs(s, "c1_fixed")
    losses = list(f.per_step(s, "c1_fixed", "loss").values())
    require(len(losses) > 1 and losses[-1] < losses[0], f"the loss went {losses}, not down")
    return {"steps": len(losses), "first": f"{losses[0]:g}", "last": f"{losses[-1]:g}"}


def retained_grads_add(s):
    _runs(s, "c1_retain_then_backward")
    first = f.tensor(f.printed_one(s, "c1_retain_then_backward", "x.grad after the first call:"))
    second = f.tensor(f.printed_one(s, "c1_retain_then_backward", "x.grad after the second call:"))
    require(
        f.close([2 * v for v in first], second),
        f"x.grad went from {first} to {second}, not doubled",
    )
    return {"first": fmt(first), "second": fmt(second)}


def nosave_doubles_silently(s):
    _runs(s, "nosave_twice")
    first = f.tensor(f.printed_one(s, "nosave_twice", "w.grad after the first call:"))
    second = f.tensor(f.printed_one(s, "nosave_twice", "w.grad after the second call:"))
    require(
        f.close([2 * v for v in first], second),
        f"w.grad went from {first} to {second}, not doubled",
    )
    return {"first": fmt(first), "second": fmt(second)}


def carried_raises_on_step_2(s):
    raised = _raises(s, "c2_no_detach")
    steps = f.steps_printed(s, "c2_no_detach")
    require(steps and steps[-1] == 2, f"it raised on step {steps[-1] if steps else '?'}, not 2")
    return {"code": raised.code}


def detached_rnn_runs(s):
    _runs(s, "c2_rnn_detach")
    losses = f.per_step(s, "c2_rnn_detach", "loss")
    require(len(losses) > 2, f"it printed {len(losses)} steps")
    return {"steps": len(losses)}


def detached_lstm_runs(s):
    _runs(s, "c2_lstm_detach")
    rows = f.printed(s, "c2_lstm_detach", "step")
    require(len(rows) > 2, f"it printed {len(rows)} steps")
    kinds = {row[-1] for row in rows}
    require(kinds == {"tuple"}, f"the state after the line was {kinds}, not a tuple")
    return {"steps": len(rows)}


def before_loop_raises(s):
    raised = _raises(s, "c2_before_loop")
    require(raised.message == _raises(s, MAIN).message, "it raised another message")
    steps = f.steps_printed(s, "c2_before_loop")
    require(steps and steps[-1] == 2, f"it raised on step {steps[-1] if steps else '?'}, not 2")
    return {"code": raised.code}


def before_loop_no_grad_runs(s):
    _runs(s, "c2_before_loop_no_grad")
    losses = list(f.per_step(s, "c2_before_loop_no_grad", "loss").values())
    require(len(losses) > 2 and losses[-1] < losses[0], f"the loss went {losses}, not down")
    return {"steps": len(losses)}


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


def _anomaly_line(s, scenario):
    """What anomaly mode named for a scenario, which must include a forward line."""
    anomaly = f.run(s, scenario).anomaly
    require(anomaly is not None and anomaly.code, "anomaly mode names no forward line")
    return anomaly


def second_loss_raises(s):
    raised = _raises(s, "c3_two_backwards")
    require(
        raised.code == "loss2.backward()", f"it raised at {raised.code!r}, not at loss2.backward()"
    )
    return {"shared": _code(_anomaly_line(s, "c3_two_backwards").code)}


def summed_equals_retained(s):
    summed = f.per_step(s, "c3_summed", "body.weight.grad[0]:")
    kept = f.per_step(s, "c3_retain", "body.weight.grad[0]:")
    _runs(s, "c3_summed")
    _runs(s, "c3_retain")
    require(summed.keys() == kept.keys(), "the two loops printed different steps")
    for step in summed:
        a, b = f.tensor(summed[step]), f.tensor(kept[step])
        require(f.close(a, b), f"step {step}: {a} summed but {b} retained")
    return {"steps": len(summed)}


def summed_twice_raises(s):
    raised = _raises(s, "c3_summed_twice")
    require(raised.code == "loss.backward()", f"it raised at {raised.code!r}")
    return {}


def gan_generator_raises(s):
    raised = _raises(s, "c4_gan_no_detach")
    require(
        raised.code == "g_loss.backward()",
        f"it raised at {raised.code!r}, not at g_loss.backward()",
    )
    anomaly = _anomaly_line(s, "c4_gan_no_detach")
    return {"node": anomaly.node, "code": anomaly.code}


def gan_detach_isolates_g(s):
    _runs(s, "c4_gan_detach")
    before = f.per_step(s, "c4_gan_detach", "G.weight.grad after the D step:")
    after = f.per_step(s, "c4_gan_detach", "G.weight.grad after the G step:")
    require(all(v is None for v in before.values()), "a discriminator step left G a gradient")
    require(
        all(any(x != 0 for x in f.tensor(v)) for v in after.values()),
        "a generator step left G.weight.grad empty",
    )
    return {"steps": len(after)}


def anomaly_from_start_names_line(s):
    _raises(s, "anomaly_from_start")
    anomaly = _anomaly_line(s, "anomaly_from_start")
    return {"node": anomaly.node, "code": anomaly.code}


def anomaly_failing_step_only(s):
    _raises(s, "anomaly_failing_step")
    said = f.printed_one(s, "anomaly_failing_step", "anomaly mode:")
    node = f.run(s, "anomaly_from_start").anomaly
    require(node is not None and node.node in said, "it names another node")
    require("File " not in said and "line" not in said, "it names a forward line after all")
    return {"node": node.node}


def anomaly_names_first_freed_node(s):
    shared = f.run(s, "c3_two_backwards").anomaly
    named = f.run(s, "c3_summed_twice").anomaly
    _raises(s, "c3_summed_twice")
    require(shared is not None and named is not None, "anomaly mode named no node")
    require(named.code != shared.code, "it names the shared line after all")
    require(named.line > shared.line, "it names a line further from the loss than the shared one")
    return {"code": named.code, "shared": shared.code}


def saved_what_mul_needs(s):
    _raises(s, "saved_tensors")
    result = f.tensor(f.printed_one(s, "saved_tensors", "exp saved its output:"))
    other = f.tensor(f.printed_one(s, "saved_tensors", "mul saved b:"))
    self_ = f.printed_one(s, "saved_tensors", "mul saved x:")
    require(all(v > 0 for v in result), "exp saved something else")
    require(other, "mul saved no b")
    require(self_ is None, f"mul saved x = {self_!r} although b needs no gradient")
    return {}


def held_tensor_stays(s):
    raised = _raises(s, "saved_tensors")
    before = f.tensor(f.printed_one(s, "saved_tensors", "exp saved its output:"))
    held = f.tensor(f.printed_one(s, "saved_tensors", "y, held by this script:"))
    require(f.close(before, held), "the held y changed")
    require("_saved_result" in (raised.code or ""), f"it raised at {raised.code!r}")
    require(raised.message == _raises(s, MAIN).message, "it raises another message")
    return {}


def grad_twice_raises(s):
    _raises(s, "grad_twice")
    raised = _raises(s, "grad_penalty")
    require(".backward()" in (raised.code or ""), f"it raised at {raised.code!r}")
    return {"code": raised.code}


def create_graph_then_backward_runs(s):
    return _penalty_steps(s, "grad_penalty_fixed")


def _penalty_steps(s, scenario):
    # A gradient-penalty loop that runs, and printed a penalty for more than one step.
    _runs(s, scenario)
    penalties = f.per_step(s, scenario, "penalty")
    require(len(penalties) > 1, "it printed one step")
    return {"steps": len(penalties)}


def create_graph_second_derivative(s):
    _runs(s, "grad_create_graph")
    first = f.tensor(f.printed_one(s, "grad_create_graph", "first derivative:"))
    second = f.tensor(f.printed_one(s, "grad_create_graph", "second derivative:"))
    # d/dx x^3 = 3x^2 and d2/dx2 = 6x, so second = 6 * sqrt(first / 3), computed here independently.
    expected = [6 * (v / 3) ** 0.5 for v in first]
    require(f.close(second, expected), f"second derivative {second}, expected {expected}")
    return {"second": fmt(second)}


def jacobian_rows_run(s):
    _runs(s, "jacobian_rows")
    rows = [f.tensor(f.printed_one(s, "jacobian_rows", f"row {i}:")) for i in (0, 1)]
    return {"rows": " and ".join(fmt(r) for r in rows)}


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


def memory_device(s):
    device = f.printed_one(s, "memory", "measured on")
    cuda = [r for r in f.pairs(s, "memory", "retain_graph") if "cuda allocated" in r]
    require(device in ("cpu", "cuda"), f"it measured on {device!r}")
    require((device == "cuda") == bool(cuda), "CUDA figures do not match the device")
    if device == "cpu":
        where = Markup("on the CPU")
    else:
        kept = {r["retain_graph"]: r["cuda allocated"] for r in cuda}
        where = Markup(
            "on {}, where <code>torch.cuda.memory_allocated()</code> read {} bytes after "
            "backward with <code>False</code> and {} with <code>True</code>"
        ).format(s.environment.device, kept[False], kept[True])
    return {"where": where}


def inplace_follows_retain(s):
    raised = _raises(s, INPLACE)
    require("modified by an inplace operation" in raised.message, "it raises another error")
    require("retain_graph=True" in (raised.code or ""), f"it raised at {raised.code!r}")
    steps = f.steps_printed(s, INPLACE)
    require(steps and steps[-1] > 1, f"it raised on step {steps[-1] if steps else '?'}")
    return {"step": steps[-1], "head": raised.message.split(":")[0]}


def lede(s):
    two_triggers(s)
    second_backward_raises(s)
    carried_raises_on_step_2(s)
    message = _raises(s, MAIN).message
    require(_raises(s, "c2_no_detach").message == message, "carried state raises another message")
    require(_raises(s, "c3_two_backwards").message == message, "two losses raise another message")
    return {}


def _stepped_before_raise(run):
    """Whether an optimizer step ran between the kept graph's backward and the one that raised:
    the previous step's, or one between the two calls of the step that raised."""
    if run.raised_step > 1:
        return True
    lines = run.source.splitlines()
    kept = next(i for i, text in enumerate(lines, 1) if "retain_graph=True" in text)
    return any(".step()" in text for text in lines[kept : run.raised.line - 1])


def retain_depends_on_step(s):
    kept = {
        key: run
        for key, run in s.loops.items()
        if run.retain == "retain" and not retained_beside_create_graph(run)
    }
    kinds = {key: verdict(run).kind for key, run in kept.items()}
    failed = [key for key, kind in kinds.items() if kind == "inplace"]
    ran = [key for key, kind in kinds.items() if kind == "costs"]
    require(failed and ran, f"retain_graph=True loops: {kinds}")
    require(len(failed) + len(ran) == len(kept), f"retain_graph=True loops: {kinds}")
    for key in failed:
        raised = kept[key].raised
        require("modified by an inplace operation" in raised.message, f"{key} raised another error")
        require(_stepped_before_raise(kept[key]), f"{key} fails with no opt.step() before it")
    summed_equals_retained(s)
    jacobian_rows_run(s)
    inplace_follows_retain(s)
    return {"mib": memory_freed_or_kept(s)["mib"]}


def scalar_saved(s):
    raised = _raises(s, "scalar_mul_twice")
    require(raised.code == "loss.backward()", f"it raised at {raised.code!r}")
    require(raised.message == _raises(s, MAIN).message, "it raises another message")
    anomaly = _anomaly_line(s, "scalar_mul_twice")
    require("* 2.0" in anomaly.code, f"anomaly mode names {anomaly.code!r}")
    return {"node": anomaly.node}


def unassigned_detach_changes_nothing(s):
    raised = _raises(s, "c2_detach_unassigned")
    require(raised.message == _raises(s, "c2_no_detach").message, "it raises another message")
    steps = f.steps_printed(s, "c2_detach_unassigned")
    before = f.steps_printed(s, "c2_no_detach")
    require(
        steps == before, f"it raised on step {steps[-1:]} where the loop without it {before[-1:]}"
    )
    return {"step": steps[-1]}


def compile_retain_raises(s):
    raised = _raises(s, "fw_compile")
    head = raised.message.split(". ")[0]
    require(
        "donated buffers" in head and "retain_graph=False" in head, f"it raised {raised.message!r}"
    )
    require("retain_graph=True" in (raised.code or ""), f"it raised at {raised.code!r}")
    steps = f.steps_printed(s, "fw_compile")
    require(steps and steps[-1] == 2, f"it raised on step {steps[-1] if steps else '?'}, not 2")
    return {}


def compile_message_fix(s):
    found = re.search(
        r"torch\._functorch\.config\.donated_buffer=False", _raises(s, "fw_compile").message
    )
    require(found, "the message no longer names donated_buffer=False")
    return {"flag": found.group(0)}


def _rank_grads(s, step):
    rows = {row[0]: row for row in f.printed(s, "fw_ddp", "step")}
    require(step in rows, f"fw_ddp printed no step {step}")
    row = rows[step]
    require(row[1:4:2] == ["rank 0:", "rank 1:"], f"fw_ddp printed {row!r}")
    return f.tensor(row[2]), f.tensor(row[4])


def ddp_ranks_differ(s):
    _runs(s, "fw_ddp")
    zero, one = _rank_grads(s, 1)
    require(not f.close(zero, one), f"both ranks got {zero}")
    return {}


def ddp_summed_agrees(s):
    zero, one = _rank_grads(s, 2)
    require(f.close(zero, one), f"the ranks got {zero} and {one}")
    return {}


def checkpoint_reentrant_grad(s):
    raised = _raises(s, "fw_checkpoint")
    require(raised.message != _raises(s, MAIN).message, "it raises this error")
    require("use_reentrant=True" in raised.message, f"it raised {raised.message!r}")
    require("autograd.grad" in (raised.code or ""), f"it raised at {raised.code!r}")
    return {}


def checkpoint_nonreentrant_runs(s):
    return _penalty_steps(s, "fw_checkpoint_fixed")


def amp_scaled_twice_raises(s):
    raised = _raises(s, "fw_amp")
    require(raised.message == _raises(s, MAIN).message, "it raises another message")
    require(raised.code == "scaler.scale(loss).backward()", f"it raised at {raised.code!r}")
    return {}


CLAIMS = (
    Claim(
        "two_triggers",
        "error",
        "A <code>backward()</code> or <code>autograd.grad</code> raises it on reaching a node whose saved tensors an earlier pass freed, as does code reading one. Nodes that save nothing can be walked again.",
        two_triggers,
    ),
    Claim(
        "second_backward_raises",
        "cause-1",
        "A second <code>loss.backward()</code> in one step raises: the first freed what the graph saved.",
        second_backward_raises,
    ),
    Claim(
        "one_call_trains",
        "cause-1",
        "With one call all {steps} steps run; the loss falls from {first} to {last}.",
        one_call_trains,
    ),
    Claim(
        "retained_grads_add",
        "cause-1",
        "With <code>retain_graph=True</code> on the first call both run and the gradients add: <code>x.grad</code> goes from {first} to {second}.",
        retained_grads_add,
    ),
    Claim(
        "nosave_doubles_silently",
        "cause-1",
        'Through operations that save nothing, such as <code>+</code> and <code>sum</code>, a second backward silently doubles the gradient, {first} to {second}, by design (<a href="https://github.com/pytorch/pytorch/issues/13494">pytorch#13494</a>).',
        nosave_doubles_silently,
    ),
    Claim(
        "scalar_saved",
        "cause-1",
        "<code>w * 2.0</code> is different: it saves the 2.0, so the second call raises (anomaly mode: <code>{node}</code>).",
        scalar_saved,
    ),
    Claim(
        "carried_raises_on_step_2",
        "cause-2",
        "An RNN whose hidden state enters the next step undetached raises on step 2 at <code>{code}</code>: that backward reaches into step 1's freed graph.",
        carried_raises_on_step_2,
    ),
    Claim(
        "detached_rnn_runs",
        "cause-2",
        "Detached at the end of each step, all {steps} steps run.",
        detached_rnn_runs,
    ),
    Claim(
        "detached_lstm_runs",
        "cause-2",
        "For an <code>nn.LSTM</code>'s tuple <code>(h, c)</code> the same line detaches both: all {steps} steps run.",
        detached_lstm_runs,
    ),
    Claim(
        "before_loop_raises",
        "cause-2",
        "A tensor computed before the loop with autograd on is carried state too: step 2's <code>{code}</code> reaches into step 1's freed graph.",
        before_loop_raises,
    ),
    Claim(
        "before_loop_no_grad_runs",
        "cause-2",
        "Made under <code>torch.no_grad()</code> it has no graph: all {steps} steps run. Compute one made by trained weights inside the step.",
        before_loop_no_grad_runs,
    ),
    Claim(
        "unassigned_detach_changes_nothing",
        "cause-2",
        "<code>h.detach()</code> alone returns a new tensor: <code>h</code> stays attached and the loop still raises on step {step}.",
        unassigned_detach_changes_nothing,
    ),
    Claim(
        "detached_depth_constant",
        "cause-2",
        "Detached, the graph depth (nodes on the longest path from <code>loss.grad_fn</code> to a leaf) stays {depth} for {steps} steps.",
        detached_depth_constant,
    ),
    Claim(
        "retained_depth_grows_by_one",
        "cause-2",
        "In this toy, with <code>retain_graph=True</code> instead, it grows every step ({depths}), and each backward walks the whole history.",
        retained_depth_grows_by_one,
    ),
    Claim(
        "second_loss_raises",
        "cause-3",
        "Two losses on one forward pass, each with its own <code>backward()</code>, raise at the second: the first freed the shared part, {shared}.",
        second_loss_raises,
    ),
    Claim(
        "summed_equals_retained",
        "cause-3",
        "Summed, one <code>backward()</code> gives the shared layer the same gradient as <code>retain_graph=True</code> and two calls, on all {steps} steps, in one walk.",
        summed_equals_retained,
    ),
    Claim(
        "summed_twice_raises",
        "cause-3",
        "A second <code>backward()</code> on the sum raises again: cause 1.",
        summed_twice_raises,
    ),
    Claim(
        "gan_generator_raises",
        "cause-4",
        "If D's loss uses G's output undetached, G's <code>backward()</code> raises: D's backward already went through G (anomaly mode: <code>{node}</code>, <code>{code}</code>).",
        gan_generator_raises,
    ),
    Claim(
        "gan_detach_isolates_g",
        "cause-4",
        "With <code>fake.detach()</code> for D all {steps} steps run; only the G step fills <code>G.weight.grad</code>.",
        gan_detach_isolates_g,
    ),
    Claim(
        "anomaly_from_start_names_line",
        "anomaly",
        "On from the start, it names <code>{node}</code> at <code>{code}</code>, from the step before.",
        anomaly_from_start_names_line,
    ),
    Claim(
        "anomaly_failing_step_only",
        "anomaly",
        "On for the failing step only, it names <code>{node}</code> but no line.",
        anomaly_failing_step_only,
    ),
    Claim(
        "anomaly_names_first_freed_node",
        "anomaly",
        "It names the first node the failing backward reaches whose saved tensors are gone, often near the loss: for a summed loss called twice, <code>{code}</code>, not the shared <code>{shared}</code>.",
        anomaly_names_first_freed_node,
    ),
    Claim(
        "saved_what_mul_needs",
        "saved",
        "<code>exp</code> saves its output; <code>x * b</code> saves <code>b</code> only, as a product keeps an operand only if the other needs a gradient.",
        saved_what_mul_needs,
    ),
    Claim(
        "held_tensor_stays",
        "saved",
        "After <code>backward()</code>, reading <code>y</code> through its node raises this error with no second backward; the script's own <code>y</code> is intact.",
        held_tensor_stays,
    ),
    Claim(
        "grad_twice_raises",
        "grad",
        "<code>autograd.grad</code> frees the graph like <code>backward()</code>: a second call raises, as does a backward after it (here <code>{code}</code>).",
        grad_twice_raises,
    ),
    Claim(
        "create_graph_then_backward_runs",
        "grad",
        "<code>create_graph=True</code> keeps the graph (<code>retain_graph</code> defaults to it): all {steps} steps run.",
        create_graph_then_backward_runs,
    ),
    Claim(
        "create_graph_second_derivative",
        "grad",
        "A second derivative: {second}.",
        create_graph_second_derivative,
    ),
    Claim(
        "jacobian_rows_run",
        "retain",
        "Gradients of several outputs one at a time need it on every call but the last: Jacobian rows {rows}.",
        jacobian_rows_run,
    ),
    Claim(
        "memory_freed_or_kept",
        "retain",
        "Without it, <code>backward()</code> frees all {saved} tensors the graph saved; with it, all {alive} ({mib} MiB) stay alive.",
        memory_freed_or_kept,
    ),
    Claim(
        "memory_device",
        "retain",
        "Counted {where}.",
        memory_device,
    ),
    Claim(
        "inplace_follows_retain",
        "inplace",
        "This RNN loop with <code>retain_graph=True</code> fails on step {step} with <q>{head}</q>: the next backward walked the kept graph after <code>opt.step()</code> changed a weight it saved.",
        inplace_follows_retain,
    ),
    Claim(
        "lede",
        "answer",
        "A backward pass needed tensors an earlier <code>backward()</code> freed: the same loss twice, two losses on one forward pass, or a step reaching into the last step's graph.",
        lede,
    ),
    Claim(
        "retain_depends_on_step",
        "answer",
        'The message\'s <code>retain_graph=True</code> is right only to walk a graph again unchanged: two losses on one forward pass, no <code>opt.step()</code> between (it gives their sum\'s gradients), or Jacobian rows. With a step between, the next backward raises <a href="#inplace">the in-place error</a>; a kept graph holds its saved tensors (<a href="#retain">{mib} MiB</a> here).',
        retain_depends_on_step,
    ),
    Claim(
        "compile_retain_raises",
        "frameworks",
        "Step 1's one <code>backward()</code> ran; step 2's, with <code>retain_graph=True</code>, raised another error.",
        compile_retain_raises,
    ),
    Claim(
        "compile_message_fix",
        "frameworks",
        'One <code>backward()</code> of the sum (<a href="#cause-3">cause 3</a>), or the message\'s <code>{flag}</code>.',
        compile_message_fix,
    ),
    Claim(
        "ddp_ranks_differ",
        "frameworks",
        '<code>retain_graph=True</code> and a second <code>backward()</code> ran, and the ranks\' gradients differ (<a href="https://github.com/pytorch/pytorch/issues/47260">pytorch#47260</a>).',
        ddp_ranks_differ,
    ),
    Claim(
        "ddp_summed_agrees",
        "frameworks",
        "One <code>backward()</code> of the sum: they agree.",
        ddp_summed_agrees,
    ),
    Claim(
        "checkpoint_reentrant_grad",
        "frameworks",
        "<code>use_reentrant=True</code>: <code>autograd.grad</code> raises another error.",
        checkpoint_reentrant_grad,
    ),
    Claim(
        "checkpoint_nonreentrant_runs",
        "frameworks",
        "<code>use_reentrant=False</code>: all {steps} steps run.",
        checkpoint_nonreentrant_runs,
    ),
    Claim(
        "amp_scaled_twice_raises",
        "frameworks",
        "<code>scaler.scale(loss).backward()</code> twice raises this error.",
        amp_scaled_twice_raises,
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


# Issue 30 (the checker's WGAN-GP answered as "retain_graph=True"): a loop whose only
# retain_graph=True sits beside create_graph=True in a gradient penalty's autograd.grad did not add
# it as the message suggests (create_graph=True already keeps that graph), so the sentence on
# retain_graph=True does not count it.
def retained_beside_create_graph(run):
    """Whether every retain_graph=True of a loop's source is in a call with create_graph=True."""
    lines = [line for line in run.source.splitlines() if "retain_graph=True" in line]
    return bool(lines) and all("create_graph=True" in line for line in lines)
