"""The checker's loop builder, its captured runs, and the verdicts derived from them."""

import re
import sys
import warnings

import pytest
import torch

from backtwice import checker, harness
from backtwice import snapshot as snap
from backtwice.manifest import load_loop_builder

from .conftest import REPRO, SNAPSHOTS

loop = load_loop_builder(REPRO)
ALL = loop.all_answers()
ids = [a.key for a in ALL]
BACKWARD = re.compile(
    r"^\s*(?:\(grad_x,\) = )?(\(?[\w +]+\)?)\.backward\(([^)]*)\)|autograd\.grad\("
)


@pytest.fixture(scope="module")
def loops():
    return snap.load_dir(SNAPSHOTS)[-1][1].loops


def calls_in(source):
    """The backward and autograd.grad calls of a loop's source, as (line number, text)."""
    return [
        (i, line.strip())
        for i, line in enumerate(source.splitlines(), 1)
        if ".backward(" in line or "autograd.grad(" in line
    ]


def roots_per_step(answers, steps=2):
    """Run a built loop, recording at each backward or grad call the tensor it starts from.

    Returns {step: [root tensors]} and {step: {'h': ..., 'c': ...}} as they were at the call.
    """
    source = loop.build_loop(answers)
    lines = source.splitlines()
    call_lines = {i: text for i, text in calls_in(source)}
    namespace = {"__name__": "__main__"}
    roots, states = {}, {}

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno in call_lines:
            text = call_lines[frame.f_lineno]
            if "autograd.grad(" in text:
                root = frame.f_globals["pred"]
            else:
                root = eval(text.split(".backward(")[0], frame.f_globals)
            state = {name: frame.f_globals.get(name) for name in ("h", "c")}
            roots.setdefault(frame.f_globals["step"], []).append(root)
            states[frame.f_globals["step"]] = state
        return local

    def trace(frame, event, arg):
        return local if frame.f_code.co_filename == "<loop>" else None

    source = "\n".join(lines).replace(f"randn({loop.STEPS}, ", f"randn({steps}, ") + "\n"
    sys.settrace(trace)
    try:
        exec(compile(source, "<loop>", "exec"), namespace)
    except RuntimeError:
        pass  # the raising loops are inspected as far as they got
    finally:
        sys.settrace(None)
    return roots, states


def nodes(tensor):
    """Every autograd node reachable from a tensor's grad_fn."""
    found, stack = set(), [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in found:
            continue
        found.add(node)
        stack.extend(child for child, _ in node.next_functions)
    return found


def test_keys_are_distinct_and_fixes_are_not_answers():
    assert len(set(ids)) == len(ids) >= 20
    fixes = {loop.fix(a).key for a in ALL}
    assert not fixes & set(ids)
    assert all(loop.fix(loop.fix(a)) == loop.fix(a) for a in ALL)


@pytest.mark.parametrize("answers", ALL + [loop.fix(a) for a in ALL], ids=lambda a: a.key)
def test_every_loop_is_a_real_training_step_without_instrumentation(answers):
    source = loop.build_loop(answers)
    assert "import torch" in source and "nn.Linear(" in source
    assert re.search(r"torch\.optim\.SGD\(", source)
    assert re.search(r"opt(_d)?\.zero_grad\(\)", source) and re.search(
        r"opt(_g)?\.step\(\)", source
    )
    assert re.search(r"^for step, .* in enumerate\(zip\(.*\), start=1\):$", source, re.M)
    assert f"torch.randn({loop.STEPS}, " in source
    for word in ("print(", "SavedTensors", "graph_depth", "saved.alive", "support"):
        assert word not in source


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_backward_calls_as_answered(answers):
    calls = [text for _, text in calls_in(loop.build_loop(answers))]
    first = calls[0]
    assert ("retain_graph=True" in first) == (answers.retain == "retain")
    assert ("create_graph=True" in first) == (answers.retain == "create")
    assert all("retain_graph" not in c and "create_graph" not in c for c in calls[1:])
    receivers = [c.split(".backward(")[0] for c in calls if ".backward(" in c]
    if answers.calls == "one":
        assert len(calls) == 1
    elif answers.calls == "twice":
        assert receivers == ["loss", "loss"]
    elif answers.calls == "shared":
        assert receivers == ["loss_main", "loss_aux"]
    elif answers.calls == "gan":
        assert receivers == ["d_loss", "g_loss"]
    elif answers.calls == "grad":
        assert "torch.autograd.grad(" in calls[0] and receivers == ["loss"]


@pytest.mark.parametrize(
    "answers", [a for a in ALL if a.calls in ("shared", "gan", "grad")], ids=lambda a: a.key
)
def test_two_calls_share_part_of_one_forward_pass(answers):
    roots, _ = roots_per_step(answers, steps=1)
    first, second = roots[1]
    shared = nodes(first) & nodes(second)
    assert any(not node.name().endswith("AccumulateGrad") for node in shared)
    if answers.calls == "gan":
        assert any("Addmm" in node.name() for node in shared)  # the generator's layers


@pytest.mark.parametrize(
    "answers", [a for a in ALL if a.when != "first" and a.retain == "none"], ids=lambda a: a.key
)
def test_what_reaches_into_the_previous_step(answers):
    if answers.when == "saved":  # it raises on step 1; the same loop with retain runs on
        answers = loop.Answers("saved", "one", "nothing", "retain")
    roots, states = roots_per_step(answers)
    step1, step2 = nodes(roots[1][0]), nodes(roots[2][0])
    shared = {node for node in step1 & step2 if not node.name().endswith("AccumulateGrad")}
    assert bool(shared) == (answers.reach != "nothing")
    if answers.reach == "lstm":
        assert states[1]["h"].grad_fn not in step2 and states[1]["c"].grad_fn in step2
        assert any(node.name() == "MulBackward0" for node in shared)  # c = f * c + i * g
    if answers.reach == "before":
        assert any(node.name() == "DivBackward0" for node in shared)
    if answers.reach == "kept":
        assert any(node.name() == "CatBackward0" for node in step2)
    if answers.reach == "total":
        assert roots[1][0] in [child for child, _ in roots[2][0].grad_fn.next_functions] or any(
            node is roots[1][0].grad_fn for node in step2
        )


@pytest.mark.parametrize("answers", [a for a in ALL if a.when == "saved"], ids=lambda a: a.key)
def test_saved_loop_reads_a_saved_tensor_after_backward(answers):
    source = loop.build_loop(answers)
    lines = source.splitlines()
    read = next(i for i, line in enumerate(lines) if "._saved_" in line)
    backward = next(i for i, line in enumerate(lines) if ".backward(" in line)
    assert backward < read


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_the_fix_is_the_experts_fix(answers):
    fixed = loop.build_loop(loop.fix(answers))
    calls = [text for _, text in calls_in(fixed)]
    assert "retain_graph" not in fixed
    if answers.calls in ("one", "twice"):
        assert len(calls) == 1
    if answers.calls == "shared":
        assert calls == ["(loss_main + loss_aux).backward()"]
    if answers.calls == "gan":
        assert "bce(D(fake.detach()), fake_label)" in fixed
        assert "g_loss = bce(D(fake), real_label)" in fixed
        assert "d_loss + g_loss" not in fixed and "g_loss + d_loss" not in fixed
    if answers.calls == "grad":
        assert "create_graph=True" in calls[0]
    if answers.reach == "rnn":
        assert "h = h.detach()" in fixed
    if answers.reach == "lstm":
        assert "h, c = h.detach(), c.detach()" in fixed
    if answers.reach == "before":
        weight = [line for line in fixed.splitlines() if line.strip().startswith("weight = ")]
        assert weight and all(line.startswith("    ") for line in weight)
        assert "detach" not in fixed
    if answers.reach == "total":
        assert "running_loss += loss.item()" in fixed and calls == ["loss.backward()"]
    if answers.reach == "kept":
        assert "replay.append(x)" in fixed
    if answers.when == "saved":
        lines = fixed.splitlines()
        read = next(i for i, line in enumerate(lines) if "._saved_" in line)
        assert read < next(i for i, line in enumerate(lines) if ".backward(" in line)


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_every_fix_ran_without_raising_with_its_optimizer_stepping(loops, answers):
    run = loops[answers.key]
    assert run.fix.key == loop.fix(answers).key
    assert run.fix.source == loop.build_loop(loop.fix(answers))
    assert run.fix.raised is None
    assert [s.step for s in run.fix.steps] == list(range(1, loop.STEPS + 1))
    for step in run.fix.steps:
        assert step.grads and all(g.norm is not None for g in step.grads)
        assert any(g.norm > 0 for g in step.grads)


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_detaching_a_tensor_computed_before_the_loop_stops_its_parameter_training(loops, answers):
    run = loops[answers.key]
    if answers.reach != "before":
        assert run.tempting is None and loop.tempting(answers) is None
        return
    assert run.tempting.source == loop.build_loop(loop.tempting(answers))
    assert ".detach()" in run.tempting.source and run.tempting.raised is None
    weight = [[g.norm for g in s.grads if g.name == "encoder.weight"] for s in run.tempting.steps]
    assert weight == [[None]] * loop.STEPS
    fixed = [[g.norm for g in s.grads if g.name == "encoder.weight"] for s in run.fix.steps]
    assert all(norm > 0 for (norm,) in fixed)
    assert "encoder.weight got no gradient at any step" in checker.tempting_sentence(run)


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_loop_ran_as_built_and_verdict_follows_from_the_run(loops, answers):
    run = loops[answers.key]
    assert run.source == loop.build_loop(answers)
    assert (run.when, run.calls, run.reach, run.retain) == (
        answers.when,
        answers.calls,
        answers.reach,
        answers.retain,
    )
    v = checker.verdict(run)
    if run.raised is None:
        assert v.kind in ("runs", "costs")
        assert len(run.steps) == loop.STEPS
        return
    assert len(run.steps) == run.raised_step - 1
    assert f"on step {run.raised_step}," in v.headline
    assert checker.call_of(run.raised.code) in v.headline
    if "modified by an inplace operation" in run.raised.message:
        assert v.kind == "inplace" and answers.retain == "retain"
    else:
        assert v.kind == "raises"
        assert run.raised.message.startswith("Trying to backward through the graph a second time")


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_the_reader_with_these_answers_sees_this_error(loops, answers):
    """Without retain_graph=True every loop raises the error, when and where the answers say."""
    run = loops[answers.key]
    if answers.retain != "none":
        return
    assert run.raised.message.startswith("Trying to backward through the graph a second time")
    assert run.raised_step == (2 if answers.when == "later" else 1)
    assert ("_saved_" in run.raised.code) == (answers.when == "saved")


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_expected_lines_match_the_capture(loops, answers):
    run = loops[answers.key]
    found = loop.expected(answers)
    assert set(found) == {"raises", "frees", "forward", "cause"}
    if answers.retain != "none":
        assert found == {"raises": None, "frees": None, "forward": None, "cause": None}
        return
    assert found["raises"] == run.raised.line
    lines = run.source.splitlines()
    frees = lines[found["frees"] - 1]
    assert ".backward(" in frees or "autograd.grad(" in frees
    assert found["frees"] <= found["raises"]
    if run.anomaly is not None:
        assert found["forward"] == run.anomaly.line
    else:
        assert "tanh" in lines[found["forward"] - 1]  # the node whose saved output was read
    cause = {"saved": "saved-read", "later": "carried-state"}.get(answers.when)
    cause = cause or ("same-loss-twice" if answers.calls == "twice" else "shared-forward")
    assert found["cause"] == cause


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_plain_and_measured_runs_agree(answers):
    """Measuring changes nothing: same raise or run, same step, same line, same text."""
    source = loop.build_loop(answers)
    job = {"id": f"loop {answers.key}", "file": f"<loop {answers.key}>", "source": source}
    plain, namespace, _, _ = harness.execute_loop(job)
    measured, measured_ns, recorder, _ = harness.execute_loop(job, measure=True)
    assert type(plain) is type(measured)
    if plain is not None:
        assert str(plain) == str(measured)
        assert namespace["step"] == measured_ns["step"]
        lines = source.splitlines()
        described = [harness.describe_exception(e, job["file"], lines) for e in (plain, measured)]
        assert described[0]["line"] == described[1]["line"]
    assert len(recorder.completed()) == (loop.STEPS if plain is None else namespace["step"] - 1)
    assert torch.Tensor.backward.__name__ == "backward"  # restored
    assert sys.gettrace() is None


def test_measuring_keeps_the_inplace_check():
    """A saved sigmoid output changed in place raises under measurement as in plain torch."""
    source = (
        "import torch\nfrom torch import nn\n\nw = nn.Parameter(torch.ones(3))\n"
        "opt = torch.optim.SGD([w], lr=0.1)\n\n"
        "for step, x in enumerate(torch.ones(2, 3), start=1):\n"
        "    opt.zero_grad()\n    s = torch.sigmoid(w * x)\n    y = s * 2\n    s.mul_(2)\n"
        "    y.sum().backward()\n    opt.step()\n"
    )
    job = {"id": "loop t", "file": "<t>", "source": source}
    plain, _, _, _ = harness.execute_loop(job)
    measured, _, _, _ = harness.execute_loop(job, measure=True)
    assert "modified by an inplace operation" in str(plain)
    assert str(measured) == str(plain)


def test_gradients_compared_over_all_steps():
    def step(n, **norms):
        grads = tuple(snap.Grad(k, v) for k, v in sorted(norms.items()))
        return snap.Step(n, (5,), 0, grads)

    fixed = (step(1, a=1.0, b=2.0), step(2, a=1.0, b=2.0))
    doubled = (step(1, a=2.0, b=4.0), step(2, a=3.0, b=2.0))
    words, first = checker.compare_grads(doubled, fixed)
    assert words == [(1, "2 times"), (2, "different for a")] and first == 1
    missing = (step(1, a=1.0, b=None),)
    assert checker.compare_grads(missing, fixed) == ([(1, "different for b")], 1)
    assert checker.compare_grads(fixed, fixed) == ([(1, "equal"), (2, "equal")], None)


INPLACE_CASES = {
    "sigmoid output": "w = torch.ones(3, requires_grad=True)\ns = torch.sigmoid(w)\ny = s * 2\ns.mul_(2)\n",
    "a leaf": "w = torch.ones(2, 3, requires_grad=True)\nv = torch.ones(2, 3)\ny = w * v\nv.add_(1)\n",
    "a view": "x = torch.ones(2, 3, requires_grad=True)\nb = (x * 1).exp()\nr = b[0]\ny = r * r\nb.add_(1)\n",
}


@pytest.mark.parametrize("anomaly", [False, True])
@pytest.mark.parametrize("case", sorted(INPLACE_CASES))
def test_saved_tensor_counter_keeps_the_inplace_check(case, anomaly):
    """SavedTensors (repro/support.py) raises what plain torch raises for a modified saved tensor."""
    sys.path.insert(0, str(REPRO))
    try:
        import support
    finally:
        sys.path.remove(str(REPRO))
    messages = []
    for counted in (False, True):
        namespace = {"torch": torch}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.set_detect_anomaly(anomaly):
                if counted:
                    with support.SavedTensors():
                        exec(INPLACE_CASES[case], namespace)
                else:
                    exec(INPLACE_CASES[case], namespace)
                with pytest.raises(RuntimeError) as raised:
                    namespace["y"].sum().backward()
        messages.append(str(raised.value))
    assert "modified by an inplace operation" in messages[0]
    assert messages[1] == messages[0]
