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
COMBOS = loop.combinations()
MAINS = [a for a in ALL if not a.variant]
SHAPED = [a for a in ALL if a.variant not in loop.DEAD_ENDS]  # main loops and their shapes
ids = [a.key for a in ALL]
THIS = "Trying to backward through the graph a second time"
INPLACE = "modified by an inplace operation"


@pytest.fixture(scope="module")
def loops():
    return snap.load_dir(SNAPSHOTS)[-1][1].loops


@pytest.fixture(scope="module")
def every_version():
    return [s for _, s in snap.load_dir(SNAPSHOTS)]


def of(key):
    return next(a for a in ALL if a.key == key)


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
    call_lines = {i: text for i, text in calls_in(source)}
    namespace = {"__name__": "__main__"}
    roots, states = {}, {}

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno in call_lines and "step" in frame.f_globals:
            text = call_lines[frame.f_lineno]
            if "autograd.grad(" in text:
                first = text.split("autograd.grad(")[1]
                first = first.split(".sum()")[0] if ".sum()" in first else first.split(",")[0]
                root = eval(first, frame.f_globals)
            else:
                root = eval(text.split(".backward(")[0], frame.f_globals)
            state = {name: frame.f_globals.get(name) for name in ("h", "c")}
            roots.setdefault(frame.f_globals["step"], []).append(root)
            states[frame.f_globals["step"]] = state
        return local

    def trace(frame, event, arg):
        return local if frame.f_code.co_filename == "<loop>" else None

    source = source.replace(f"randn({loop.STEPS}, ", f"randn({steps}, ")
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
    assert len(set(ids)) == len(ids) >= 50
    assert len({a.combo for a in ALL}) == len(COMBOS)
    fixes = {loop.fix(a).key for a in ALL}
    assert not fixes & set(ids)
    assert all(loop.fix(loop.fix(a)) == loop.fix(a) for a in ALL)


def test_the_contract_answer_values_are_offered():
    # CONTRACTS.md: the reach values the diagnoser's fragments and other helpers rely on.
    offered = {name: {v for v, _ in options} for name, _, _, options in checker.QUESTIONS}
    contract = {"nothing", "rnn", "lstm", "lstm-both", "before", "frozen", "total", "kept", "bank"}
    assert contract | {"other"} <= offered["reach"]
    assert {"one", "twice", "shared", "gan", "grad", "other"} <= offered["calls"]
    assert offered["when"] == {"first", "later", "saved", "other"}
    assert offered["retain"] == {"none", "retain", "create", "other"}
    for a in COMBOS:  # every combination is reachable through the form's options
        assert all(getattr(a, name) in offered[name] for name in checker.NAMES), a.key
    assert {a.reach for a in COMBOS} == contract


@pytest.mark.parametrize("answers", ALL + [loop.fix(a) for a in ALL], ids=lambda a: a.key)
def test_every_loop_is_a_real_training_step_without_instrumentation(answers):
    source = loop.build_loop(answers)
    assert "import torch" in source and "nn.Linear(" in source
    assert re.search(r"torch\.optim\.(SGD|LBFGS)\(", source)
    assert re.search(r"opt(_d|_g)?\.zero_grad\(\)", source)
    assert re.search(r"opt(_d|_g)?\.step\((closure)?\)", source)
    assert ("torch.optim.LBFGS(" in source) == answers.closure
    if answers.cell:  # a notebook: one batch, cell 2 run twice
        assert re.search(r"^for step in \(1, 2\):  # cell 2, run twice$", source, re.M)
    else:
        assert re.search(r"^for step, .* in enumerate\(zip\(.*\), start=1\):$", source, re.M)
        assert f"torch.randn({loop.STEPS}, " in source
    for word in ("print(", "SavedTensors", "graph_depth", "saved.alive", "support"):
        assert word not in source


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_backward_calls_as_answered(answers):
    calls = [text for _, text in calls_in(loop.build_loop(answers))]
    if answers.variant in ("fake", "sum"):
        return  # non-fixes that change the calls; checked with the dead ends
    first = calls[0]
    retain = answers.retain == "retain"
    assert ("retain_graph=True" in first) == retain
    if answers.retain == "create":
        assert "create_graph=True" in first
    assert all("retain_graph" not in c for c in calls[1:])
    receivers = [c.split(".backward(")[0] for c in calls if ".backward(" in c]
    wgan = answers.variant == "wgan" or (answers.calls, answers.retain) == ("gan", "create")
    expected = {
        "one": ["loss"] if answers.reach != "total" else ["running_loss"],
        "twice": ["loss", "loss"],
        "shared": ["loss_main", "loss_aux"],
        "gan": ["d_loss", "g_loss"],
        "gfirst": ["g_loss", "d_loss"],
        "grad": ["loss"],
        "dist": ["policy_loss", "entropy_loss"],
        "ac": ["critic_loss", "actor_loss"],
    }[answers.calls]
    if answers.cell or answers.closure:
        expected = ["loss"]  # one call in the cell or the closure, run twice
    if answers.meta:  # the inner update's autograd.grad, then the meta-loss's backward()
        expected = ["loss"]
        assert "torch.autograd.grad(" in calls[0] and "create_graph=True" in calls[0]
    if wgan:
        expected = ["d_loss", "g_loss"]
        assert "autograd.grad(" in calls[0] and "create_graph=True" in calls[0]
    assert receivers == expected
    if answers.calls == "grad" and not wgan:
        assert "torch.autograd.grad(" in calls[0]


@pytest.mark.parametrize(
    "answers",
    [a for a in SHAPED if a.when == "first" and a.calls not in ("twice",) and a.retain != "retain"],
    ids=lambda a: a.key,
)
def test_two_calls_share_part_of_one_forward_pass(answers):
    roots, _ = roots_per_step(answers, steps=1)
    first, second = roots[1][0], roots[1][-1]
    shared = nodes(first) & nodes(second)
    assert any(not node.name().endswith("AccumulateGrad") for node in shared)
    if answers.gan:
        assert any("Addmm" in node.name() for node in shared)  # the generator's layers


@pytest.mark.parametrize(
    "answers", [a for a in SHAPED if a.when == "later" and a.retain == "none"], ids=lambda a: a.key
)
def test_what_reaches_into_the_previous_step(answers):
    roots, states = roots_per_step(answers)
    step1, step2 = nodes(roots[1][0]), nodes(roots[2][0])
    shared = {node for node in step1 & step2 if not node.name().endswith("AccumulateGrad")}
    if answers.variant == "same":  # set and read within the step: nothing reaches back
        assert not shared and loop.build_loop(answers) == loop.build_loop(loop.fix(answers))
        return
    assert shared, answers.key
    if answers.variant == "cache":  # the bias from the first forward, through its embedding
        assert any(node.name() == "EmbeddingBackward0" for node in shared)
    if answers.meta:  # the weights carry the learned rule's update from the step before
        carried = nodes(roots[1][-1]) & nodes(roots[2][-1])  # the meta-losses of steps 1 and 2
        assert any(node.name() == "AddmmBackward0" for node in carried)
    if answers.reach == "lstm" and not answers.variant:
        assert states[1]["h"].grad_fn not in step2 and states[1]["c"].grad_fn in step2
        assert any(node.name() == "MulBackward0" for node in shared)  # c = f * c + i * g
    if answers.reach == "before":
        assert any(node.name() == "DivBackward0" for node in shared)
    if answers.reach == "frozen":
        assert any(node.name() == "TanhBackward0" for node in shared)  # computed once, before
    if answers.reach == "kept":
        assert any(node.name() == "CatBackward0" for node in step2)


@pytest.mark.parametrize("answers", [a for a in ALL if a.when == "saved"], ids=lambda a: a.key)
def test_saved_loop_reads_a_saved_tensor_after_backward(answers):
    lines = loop.build_loop(answers).splitlines()
    read = next(i for i, line in enumerate(lines) if "._saved_" in line)
    backward = next(i for i, line in enumerate(lines) if ".backward(" in line)
    assert backward < read


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_the_fix_is_the_experts_fix(answers):
    fixed = loop.build_loop(loop.fix(answers))
    calls = [text for _, text in calls_in(fixed)]
    assert "retain_graph" not in fixed
    reach, calls_of, variant = answers.reach, answers.calls, answers.variant
    if calls_of in ("one", "twice") and variant != "meta":
        assert len(calls) == 1
    if calls_of == "shared":
        assert calls == ["(loss_main + loss_aux).backward()"]
    if answers.gan:
        assert "D(fake.detach())" in fixed and "d_loss + g_loss" not in fixed
        assert re.search(r"g_loss = .*D\(fake\)", fixed)  # G's loss calls D on the fake again
        assert "out_fake" not in fixed
    if variant == "wgan" or (calls_of, answers.retain) == ("gan", "create"):
        assert "(1 - eps) * fake.detach())" in fixed and "create_graph=True" in fixed
    if calls_of == "grad" and variant != "wgan":
        assert "create_graph=True" in calls[0]
    if calls_of == "dist":
        assert calls == ["(policy_loss + entropy_loss).backward()"]
    if calls_of == "ac":
        assert "advantage.detach()" in fixed and calls == ["(actor_loss + critic_loss).backward()"]
    if reach == "rnn" and not answers.meta and variant != "baseline":
        assert "h = h.detach()" in fixed
    if answers.meta:  # the unroll is cut where the step ends; create_graph=True stays
        assert fixed.rstrip().endswith(
            "w = w.detach().requires_grad_()  # the next unroll starts here"
        )
        assert "create_graph=True" in calls[0]
    if variant == "baseline":  # the average is kept as a number, the reward keeps its graph
        assert "0.1 * reward.mean().item()" in fixed and "detach" not in fixed
    if answers.closure:  # the forward pass runs in the closure, each time L-BFGS calls it
        closure = fixed[fixed.index("def closure():") :]
        assert "loss = " in closure and "loss = " not in fixed[: fixed.index("def closure():")]
    if reach == "lstm":
        assert "h, c = h.detach(), c.detach()" in fixed
    if reach == "lstm-both":  # a tuple has no .detach(): both tensors, one by one
        assert "hidden = tuple(t.detach() for t in hidden)" in fixed
    if reach == "before":  # trained weights: recomputed inside, never detached
        weight = [line for line in fixed.splitlines() if line.strip().startswith("weight = ")]
        assert weight and all(line.startswith("    ") for line in weight)
        assert "detach" not in fixed
    if reach == "frozen":
        lines = fixed.splitlines()
        at = next(i for i, line in enumerate(lines) if "features = " in line)
        assert lines[at - 1] == "with torch.no_grad():  # the frozen model needs no graph"
    if reach == "total":
        assert "running_loss += loss.item()" in fixed and calls == ["loss.backward()"]
    if reach == "kept":
        assert "replay.append(x)" in fixed
    if reach == "bank" and variant == "cache":  # trained weights: computed in each forward
        assert "        bias = self.rel(" in fixed and "detach" not in fixed
    elif reach == "bank" and variant == "same":  # read in the same step: nothing to fix
        assert fixed == loop.build_loop(answers)
    elif reach == "bank":
        kept = "self.prev = y.detach()" if variant == "attr" else "bank.append(feat.detach())"
        assert kept in fixed
    if variant == "cell":
        lines = fixed.splitlines()
        cell = lines.index("for step in (1, 2):  # cell 2, run twice")
        assert any("loss = " in line for line in lines[cell:])
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
    steps = 2 if answers.cell else loop.STEPS
    assert [s.step for s in run.fix.steps] == list(range(1, steps + 1))
    for step in run.fix.steps:
        assert step.grads and all(g.norm is not None for g in step.grads)
        assert any(g.norm > 0 for g in step.grads)


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
        assert len(run.steps) == (2 if answers.cell else loop.STEPS)
        return
    assert len(run.steps) == run.raised_step - 1
    assert f"on step {run.raised_step} " in v.outcome
    assert checker.call_of(run.raised.code) in v.outcome
    if INPLACE in run.raised.message:
        assert v.kind == "inplace" and answers.retain == "retain"
    elif run.raised.message.startswith(THIS):
        assert v.kind == "raises"
    else:
        assert v.kind == "error" and run.raised.message in v.outcome


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_the_reader_with_these_answers_sees_this_error(loops, answers):
    """Every loop the builder says raises this error does, when and where the answers say."""
    run = loops[answers.key]
    if not loop.raises_this_error(answers):
        assert run.raised is None or not run.raised.message.startswith(THIS)
        return
    assert run.raised.message.startswith(THIS)
    step = 2 if answers.when == "later" or answers.cell else 1
    assert run.raised_step == step
    assert ("_saved_" in run.raised.code) == (answers.when == "saved")


def test_without_retain_graph_every_shape_raises_this_error(loops):
    for a in SHAPED:
        if a.retain == "none" and a.variant != "same":  # 'same' shows what is not the cause
            assert loops[a.key].raised.message.startswith(THIS), a.key


@pytest.mark.parametrize("version", range(4))
def test_an_optimizer_step_before_a_kept_graph_is_used_again_raises_the_inplace_error(
    every_version, version
):
    """On every kept torch: each retain_graph combination whose two calls get an opt.step()
    between them raises the in-place error on step 1, where the same loop without it runs."""
    runs = every_version[version].loops
    stepped = [a for a in ALL if a.variant == "step"]
    assert {a.calls for a in stepped} == {"twice", "shared", "dist", "ac"}
    for a in stepped:
        run, main = runs[a.key], runs[a.combo]
        assert INPLACE in run.raised.message and run.raised_step == 1, a.key
        assert main.raised is None, a.combo


@pytest.mark.parametrize("version", range(4))
def test_decisive_variants_on_every_torch(every_version, version):
    """The variants the answers cannot see, as the issue's real programs found them."""
    runs = every_version[version].loops
    # a GAN whose G loss reuses D's output from before opt_d.step(): in-place error on step 1
    assert INPLACE in runs["first-gan-nothing-retain~reuse"].raised.message
    assert runs["first-gan-nothing-retain~reuse"].raised_step == 1
    assert runs["first-gan-nothing-retain"].raised is None
    # nn.LSTM / nn.GRU over a sequence with retain_graph=True: in-place error on step 2
    for key in ("later-one-rnn-retain~seq", "later-one-lstm-retain~seq"):
        assert INPLACE in runs[key].raised.message and runs[key].raised_step == 2, key
    assert runs["later-one-lstm-retain"].raised is None  # the cell variant runs
    # a WGAN-GP whose critic keeps the generator's graph raises this error
    assert runs["first-grad-nothing-create~wgan"].raised.message.startswith(THIS)
    assert runs["first-grad-nothing-create"].raised is None


@pytest.mark.parametrize("version", range(4))
def test_dead_ends_do_what_the_page_says(every_version, version):
    runs = every_version[version].loops
    for key in (
        "first-twice-nothing-none~zerograd",
        "first-twice-nothing-none~nograd",
        "later-one-rnn-none~nodetach",
    ):  # still raise this error, at the same call as the loop they were meant to fix
        run, main = runs[key], runs[key.split("~")[0]]
        assert run.raised.message == main.raised.message, key
        assert run.raised_step == main.raised_step and run.raised.code == main.raised.code, key
    fake = runs["later-one-rnn-none~fake"]  # runs, and trains nothing
    assert fake.raised is None
    assert all(g.norm is None for s in fake.steps for g in s.grads)
    tuple_ = runs["later-one-lstm-both-none~tuple"]
    assert tuple_.raised.type == "AttributeError" and "'tuple'" in tuple_.raised.message
    detached = runs["later-one-before-none~detach"]  # runs; encoder.weight stops training
    weight = [[g.norm for g in s.grads if g.name == "encoder.weight"] for s in detached.steps]
    assert weight == [[None]] * loop.STEPS
    summed = runs["first-ac-nothing-none~sum"]  # runs, but trains the critic on the actor's term
    assert summed.raised is None
    first = {g.name: g.norm for g in summed.steps[0].grads}
    fixed = {g.name: g.norm for g in summed.fix.steps[0].grads}
    assert first["critic.weight"] != pytest.approx(fixed["critic.weight"], rel=1e-3)
    assert first["actor.weight"] == pytest.approx(fixed["actor.weight"], rel=1e-5)


@pytest.mark.parametrize("answers", ALL, ids=ids)
def test_expected_lines_match_the_capture(loops, answers):
    run = loops[answers.key]
    found = loop.expected(answers)
    assert set(found) == {"raises", "frees", "forward", "cause"}
    if not loop.raises_this_error(answers):
        assert found == {"raises": None, "frees": None, "forward": None, "cause": None}
        return
    assert found["raises"] == run.raised.line
    lines = run.source.splitlines()
    frees = lines[found["frees"] - 1]
    assert ".backward(" in frees or "autograd.grad(" in frees
    assert found["frees"] <= found["raises"]
    # Torch's own anomaly mode, run here (the capture runs loops without it), names the forward
    # line independently of loop.expected(); reading a saved tensor raises outside backward, so
    # anomaly mode names nothing there.
    job = {"id": f"loop {answers.key}", "file": f"<loop {answers.key}>", "source": run.source}
    error, _, _, caught = harness.execute_loop(job, anomaly=True)
    assert str(error) == run.raised.message
    anomaly = harness.describe_anomaly(caught, job["file"], lines)
    if answers.when != "saved":
        assert found["forward"] == anomaly["line"]
    else:
        assert anomaly is None
        assert "tanh" in lines[found["forward"] - 1]  # the node whose saved output was read
    # a re-run cell too, on a later step, and an L-BFGS closure L-BFGS calls again
    twice = answers.calls == "twice" or answers.cell or answers.closure
    cause = {"saved": "saved-read", "later": "carried-state"}.get(answers.when)
    cause = "same-loss-twice" if twice else cause or "shared-forward"
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
    steps = 2 if answers.cell else loop.STEPS
    assert len(recorder.completed()) == (steps if plain is None else namespace["step"] - 1)
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


def test_diff_hunks_keep_one_line_of_context_where_lines_come_or_go_and_mark_gaps():
    old = "".join(f"line {i}\n" for i in range(1, 13))
    new = old.replace("line 3\n", "line three\n").replace("line 11\n", "")
    assert checker.diff_hunks(old, new) == [
        ("-", "line 3"),  # rewritten: the removed line says where
        ("+", "line three"),
        ("@", ""),
        (" ", "line 10"),  # removed: the lines around it say where
        ("-", "line 11"),
        (" ", "line 12"),
    ]
    added = old.replace("line 6\n", "line 6\nline 6b\n")
    assert checker.diff_hunks(old, added) == [(" ", "line 6"), ("+", "line 6b"), (" ", "line 7")]


def test_headlines_say_runs_only_under_a_condition_where_a_variant_raises(loops):
    data, rows = checker.build(loops)
    headlines = {row["key"]: row["verdict"]["headline"] for row in rows}
    for a in COMBOS:
        shown = [k for k in (b.key for b in SHAPED if b.combo == a.key)]
        raising = [k for k in shown if loops[k].raised is not None]
        headline = headlines[a.key]
        if raising and len(shown) > 1:
            assert headline.startswith("Depending on its shape (below)") or headline.endswith(
                " in each shape below."
            ), headline
            assert not headline.startswith("Runs"), headline
        assert len(headline.split()) <= 30, headline
        assert "already the fix" not in headline
    assert not any("already the fix" in s for s in data["strings"])


def test_the_packed_result_reads_back_with_the_tables_kind(loops):
    data, rows = checker.build(loops)
    for row in rows:
        result = checker.unpacked(data["results"][row["key"]])
        assert result["kind"] == row["verdict"]["kind"]
        assert checker.packed(result) == data["results"][row["key"]]


@pytest.mark.parametrize(
    "receiver, role",
    [
        ("loss_aux", "the auxiliary loss's backward()"),
        ("running_loss", "the backward() on your running total"),
        ("actor_loss", "the actor's backward()"),
        ("g_loss", "G's backward()"),
    ],
)
def test_a_raising_call_is_named_by_its_role_with_the_loops_line_as_example(loops, receiver, role):
    found = [
        run
        for run in loops.values()
        if run.raised and checker.call_of(run.raised.code).startswith(receiver + ".backward(")
    ]
    assert found
    for run in found:
        outcome = checker.verdict(run).outcome
        assert f" at {role} (e.g. {checker.call_of(run.raised.code)}): " in outcome


def test_a_second_call_on_one_loss_is_the_second_backward(loops):
    run = loops["first-twice-nothing-none"]
    assert " at your second backward() (e.g. loss.backward()): " in checker.verdict(run).outcome
    run = loops["later-twice-nothing-none"]
    assert " at the backward() in your re-run cell (e.g. " in checker.verdict(run).outcome


def test_the_checks_behind_the_sentences_stop_the_build(loops):
    import dataclasses

    from backtwice.errors import ClaimError

    def built(change):
        doctored = dict(loops)
        change(doctored)
        return checker.build(doctored)

    def quiet_wgan(d):  # the WGAN-GP variant no longer raises: the note would have no ground
        run = d["first-grad-nothing-create~wgan"]
        d["first-grad-nothing-create~wgan"] = dataclasses.replace(
            run, raised=None, raised_step=None
        )

    with pytest.raises(ClaimError, match="no variant raises this error"):
        built(quiet_wgan)

    def no_step(d):  # the 'step' variant's source without the step between the calls
        run = d["first-shared-nothing-retain~step"]
        source = run.source.replace("    opt.step()  # e.g. a step per loss\n", "")
        d["first-shared-nothing-retain~step"] = dataclasses.replace(run, source=source)

    with pytest.raises(ClaimError, match="does not match the phrase"):
        built(no_step)

    def fix_without_detach(d):  # a fix that does not hold the edit the page names
        run = d["later-one-bank-none"]
        source = run.fix.source.replace("feat.detach()", "feat.clone()")
        fix = dataclasses.replace(run.fix, source=source)
        d["later-one-bank-none"] = dataclasses.replace(run, fix=fix)

    with pytest.raises(ClaimError, match="lacks 'feat.detach\\(\\)'"):
        built(fix_without_detach)

    def no_fix(d):  # a raising loop whose fix is its own code
        run = d["later-one-kept-none"]
        d["later-one-kept-none"] = dataclasses.replace(
            run, fix=dataclasses.replace(run.fix, source=run.source)
        )

    with pytest.raises(ClaimError, match="its fix is the same code"):
        built(no_fix)


def test_a_wgan_gp_is_answered_under_either_reading_of_question_four(loops):
    """Canonical WGAN-GP code passes create_graph=True, retain_graph=True to autograd.grad: a
    reader may answer 'create' or 'retain' (or 'neither'); each path shows the WGAN-GP raising and
    the critic's detach() as the fix, which trains every parameter at every step."""
    wgan = {
        "first-gan-nothing-create": "create_graph=True)",
        "first-gan-nothing-retain~wgan": "create_graph=True, retain_graph=True)",
        "first-gan-nothing-none~wgan": "create_graph=True)",
    }
    for key, call in wgan.items():
        run = loops[key]
        assert f"torch.autograd.grad(D(mix).sum(), mix, {call}" in run.source, key
        assert run.raised.message.startswith(THIS), key
        assert checker.call_of(run.raised.code) == "g_loss.backward()", key
        assert "D(fake.detach())" in run.fix.source and "retain_graph" not in run.fix.source
        assert all(g.norm is not None for s in run.fix.steps for g in s.grads), key


# The new cases: each fix, run, trains every parameter its loop trained before.
NEW_CASES = (
    "later-one-bank-none~cache",
    "later-one-bank-retain~cache",
    "later-one-rnn-none~baseline",
    "later-one-rnn-none~meta",
    "later-grad-rnn-create",
    "first-one-nothing-none",
    "first-twice-nothing-none~closure",
)


def measured_steps(source):
    """Run a loop's source measured; its completed steps as the snapshot holds them."""
    job = {"id": "loop t", "file": "<loop t>", "source": source}
    error, _, recorder, _ = harness.execute_loop(job, measure=True)
    assert error is None
    return tuple(
        snap.Step(
            s["step"],
            tuple(s["depths"]),
            s["saved"],
            tuple(snap.Grad(g["name"], g["norm"]) for g in s["grads"]),
        )
        for s in recorder.completed()
    )


def test_no_fix_shown_leaves_a_parameter_its_loop_trained_without_a_gradient(loops):
    """The capture's per-step parameter record: every parameter a loop gave a gradient at a step
    it completed gets one at every step of the fix the page shows; checker.build stops on a fix
    that does not (here, the tempting detach() of a bias cached from trained weights)."""
    import dataclasses

    from backtwice.errors import ClaimError

    shown = [k for k, run in loops.items() if run.source != run.fix.source]
    assert set(NEW_CASES) <= set(shown)
    for key in shown:
        assert checker.dropped_by_fix(loops[key]) == [], key
    for key in NEW_CASES:
        run = loops[key]
        trained = {g.name for s in run.steps for g in s.grads if g.norm is not None}
        for step in run.fix.steps:
            assert trained <= {g.name for g in step.grads if g.norm is not None}, key
            assert all(g.norm is not None for g in step.grads), key
    # L-BFGS computes the gradients inside step(closure): recorded after the closure, not before
    lbfgs = loops["first-one-nothing-none"].fix.steps
    assert len(lbfgs) == loop.STEPS and all(g.norm for s in lbfgs for g in s.grads)

    run = loops["later-one-bank-none~cache"]
    source = run.fix.source.replace(
        "squeeze(-1)  # computed in each forward",
        "squeeze(-1).detach()  # computed in each forward",
    )
    assert source != run.fix.source
    steps = measured_steps(source)
    assert all(g.norm is None for s in steps for g in s.grads if g.name == "model.rel.weight")
    doctored = dict(loops)
    fix = dataclasses.replace(run.fix, steps=steps)
    doctored["later-one-bank-none~cache"] = dataclasses.replace(run, fix=fix)
    assert checker.dropped_by_fix(doctored["later-one-bank-none~cache"]) == ["model.rel.weight"]
    with pytest.raises(ClaimError, match="leaves model.rel.weight without a gradient"):
        checker.build(doctored)
