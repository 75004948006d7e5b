"""The checker's loop builder, its captured runs, and the verdicts derived from them."""

import math
import sys

import pytest
import torch

from backtwice import checker
from backtwice import snapshot as snap
from backtwice.manifest import load_loop_builder

from .conftest import REPRO, SNAPSHOTS

loop = load_loop_builder(REPRO)
ALL = loop.all_answers()


@pytest.fixture(scope="module")
def loops():
    return snap.load_dir(SNAPSHOTS)[-1][1].loops


def run_steps(answers, steps=2):
    """Run a built loop for `steps` steps, recording the step's tensors where it prints.

    Returns the records and the loop's namespace (the loop runs at module level, so its
    variables are there even when it raised).
    """
    seen = []

    def record(*args):
        frame = sys._getframe(1).f_locals
        seen.append({name: frame.get(name) for name in ("h", "loss", "loss_a", "loss_b")})

    namespace = {"__name__": "__main__", "print": record}
    source = loop.build_loop(answers).replace(
        f"range(1, {loop.STEPS + 1})", f"range(1, {steps + 1})"
    )
    sys.path.insert(0, str(REPRO))
    try:
        exec(compile(source, "<loop>", "exec"), namespace)
    except RuntimeError:
        pass  # the raising loops are inspected as far as they got
    finally:
        sys.path.remove(str(REPRO))
    return seen, namespace


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


def test_sixteen_distinct_combinations():
    assert len({a.key for a in ALL}) == 16
    assert {len(a.key) for a in ALL} == {4}


@pytest.mark.parametrize(
    "answers", [a for a in ALL if a.carried and a.retain and a.calls == 1], ids=lambda a: a.key
)
def test_carried_state_reaches_the_previous_steps_graph(answers):
    (first, second), _ = run_steps(answers)
    loss = "loss" if answers.summed else "loss_a"
    assert first["h"].grad_fn in nodes(second[loss])


@pytest.mark.parametrize(
    "answers", [a for a in ALL if not a.carried and a.calls == 1], ids=lambda a: a.key
)
def test_detached_state_does_not(answers):
    (first, second), _ = run_steps(answers)
    loss = "loss" if answers.summed else "loss_a"
    assert first["h"].grad_fn not in nodes(second[loss])
    shared = nodes(first[loss]) & nodes(second[loss])
    assert all(node.name().endswith("AccumulateGrad") for node in shared)


@pytest.mark.parametrize("answers", ALL, ids=lambda a: a.key)
def test_losses_and_calls_as_asked(answers):
    source = loop.build_loop(answers)
    calls = [line.strip() for line in source.splitlines() if ".backward(" in line]
    assert len(calls) == answers.calls
    assert ("retain_graph=True" in calls[0]) == answers.retain
    assert all("retain_graph" not in call for call in calls[1:])
    two_losses = answers.summed or answers.calls == 2
    assert ("loss_b" in source) == two_losses
    if answers.summed:
        assert "loss = loss_a + loss_b" in source
        assert all(call.startswith("loss.backward(") for call in calls)
    elif answers.calls == 2:
        assert [call.split(".")[0] for call in calls] == ["loss_a", "loss_b"]


@pytest.mark.parametrize("answers", [a for a in ALL if a.summed], ids=lambda a: a.key)
def test_summed_means_one_loss_tensor(answers):
    _, step = run_steps(answers, steps=1)
    assert isinstance(step["loss"], torch.Tensor)
    assert step["loss"].grad_fn.name() == "AddBackward0"
    assert set(nodes(step["loss"])) >= nodes(step["loss_a"]) | nodes(step["loss_b"])


@pytest.mark.parametrize("answers", ALL, ids=lambda a: a.key)
def test_every_fix_ran_without_raising(loops, answers):
    run = loops[answers.key]
    fixed = loops[run.fix]
    assert fixed.raised is None
    assert len(fixed.steps) == loop.STEPS
    assert (fixed.calls, fixed.retain, fixed.carried) == (1, False, False)
    assert fixed.summed == (answers.summed or answers.calls == 2)


def test_step_one_gradients_have_the_known_values(loops):
    # At step 1, h = w = 0.5: d/dw (w - 0.1)^2 = 2 (w - 0.1) and d/dw 0.5 w^2 = w.
    w = 0.5
    one_loss, both = 2 * (w - 0.1), 2 * (w - 0.1) + w
    assert loops["1nnn"].steps[0].grad == pytest.approx(one_loss)
    assert loops["1nny"].steps[0].grad == pytest.approx(both)
    assert loops["2ynn"].steps[0].grad == pytest.approx(both)
    assert loops["2yny"].steps[0].grad == pytest.approx(2 * both)


def test_clean_loop_gradients_per_step(loops):
    # Detached: h_k = 0.5^k * ... with h_{k-1} fixed, d/dw (h_{k-1} w - 0.1)^2 = 2 h_{k-1} (h_{k-1} w - 0.1).
    w, h, expected = 0.5, 1.0, []
    for _ in range(loop.STEPS):
        expected.append(2 * h * (h * w - 0.1))
        h *= w
    assert [s.grad for s in loops["1nnn"].steps] == pytest.approx(expected, abs=1e-6)


def test_raising_loops_record_step_call_and_anomaly(loops):
    for run in loops.values():
        if run.raised is None:
            continue
        assert run.raised.message.startswith("Trying to backward through the graph a second time")
        assert len(run.steps) == run.raised_step - 1
        lines = run.source.splitlines()
        assert ".backward(" in lines[run.raised.line - 1]
        assert run.raised_call in (1, 2) and (run.raised_call == 1 or run.calls == 2)
        assert run.anomaly.node.endswith("Backward0")
        assert lines[run.anomaly.line - 1].strip() == run.anomaly.code


def test_verdicts_follow_from_the_facts(loops):
    kinds = {key: checker.verdict(run, loops[run.fix]).kind for key, run in loops.items()}
    for key, run in loops.items():
        if run.raised is not None:
            assert kinds[key] == "raises"
        elif run.retain:
            assert kinds[key] == "costs", key
        else:
            assert kinds[key] == "runs", key


def test_doubled_gradient_is_named_from_the_ratio():
    fixed = snap.LoopRun(
        1, False, False, True, "", None, None, None, None, (snap.Step(1, 5, 1.3, 0),), "1nny"
    )
    doubled = snap.LoopRun(
        2, True, False, True, "", None, None, None, None, (snap.Step(1, 5, 2.6, 0),), "1nny"
    )
    tripled = snap.LoopRun(
        2, True, False, True, "", None, None, None, None, (snap.Step(1, 5, 3.9, 0),), "1nny"
    )
    assert checker.costs_of(doubled, fixed) == (
        "accumulates a doubled gradient: at step 1, twice the fixed loop's",
    )
    assert checker.costs_of(tripled, fixed) == (
        "gives a gradient at step 1 3 times the fixed loop's",
    )
    assert math.isclose(2.6 / 1.3, 2)
