"""Captured figures in the committed snapshot against answers computed here, without torch."""

import math

import pytest

from backtwice import facts as f
from backtwice import snapshot as snap

from .conftest import SNAPSHOTS


@pytest.fixture(scope="module")
def s():
    return snap.load_dir(SNAPSHOTS)[-1][1]


def grad(s, scenario, label):
    return f.tensor(f.printed_one(s, scenario, label))


def test_sum_of_squares_gradient_is_two_x_and_accumulates(s):
    x = [1.0, 2.0, 3.0]
    assert grad(s, "c1_retain_then_backward", "x.grad after the first call:") == [2 * v for v in x]
    assert grad(s, "c1_retain_then_backward", "x.grad after the second call:") == [4 * v for v in x]


def test_summed_losses_gradient_is_exp_plus_twice_exp_2x(s):
    # d/dx [sum(e^x) + sum(e^2x)] = e^x + 2 e^2x
    expected = [math.exp(v) + 2 * math.exp(2 * v) for v in (1.0, 2.0, 3.0)]
    assert grad(s, "c3_summed", "x.grad:") == pytest.approx(expected, rel=1e-6)
    assert grad(s, "c3_retain", "x.grad:") == pytest.approx(expected, rel=1e-6)


def test_recomputed_history_gradient(s):
    # Step k's loss is (w^k - 0.1)^2; w.grad accumulates 2 (w^k - 0.1) k w^(k-1) over k = 1..4.
    w = 0.5
    expected = sum(2 * (w**k - 0.1) * k * w ** (k - 1) for k in range(1, 5))
    assert grad(s, "c2_recompute", "w.grad:") == pytest.approx([expected], rel=1e-6)
    assert grad(s, "c2_retain_graph", "w.grad:") == pytest.approx([expected], rel=1e-6)


def test_cube_derivatives(s):
    x = [1.0, 2.0, 3.0]
    assert grad(s, "grad_retain", "first:") == [3 * v**2 for v in x]
    assert grad(s, "grad_retain", "second:") == [3 * v**2 for v in x]
    assert grad(s, "grad_create_graph", "first derivative:") == [3 * v**2 for v in x]
    assert grad(s, "grad_create_graph", "second derivative:") == [6 * v for v in x]


def test_saved_exp_result_is_e_to_the_x(s):
    saved = grad(s, "saved_result", "before backward:")
    assert saved == pytest.approx([math.exp(1.0), math.exp(2.0)], rel=1e-6)


def test_memory_counts_two_saved_exp_outputs(s):
    rows = f.pairs(s, "memory", "retain_graph")
    size = 2048 * 2048 * 4  # float32
    counts = {
        (r["retain_graph"], "alive after backward" in r): (
            r.get("saved tensors", r.get("alive after backward")),
            r["bytes"],
        )
        for r in rows
    }
    assert counts[(False, False)] == (2, 2 * size)
    assert counts[(False, True)] == (0, 0)
    assert counts[(True, True)] == (2, 2 * size)


def test_detached_depth_counts_pow_sub_mul_and_accumulate(s):
    # loss = (h * w - 0.1) ** 2: PowBackward0 -> SubBackward0 -> MulBackward0 -> AccumulateGrad.
    depths = [row[2] for row in f.printed(s, "c2_detach", "graph depth at step")]
    assert depths == [4, 4, 4, 4]


def step_one_norms(run):
    return {g.name: g.norm for g in run.steps[0].grads}


def fixed_step_one_norms(run):
    return {g.name: g.norm for g in run.fix.steps[0].grads}


def test_same_loss_twice_with_retain_doubles_every_step_one_gradient(s):
    # Two backward calls on one loss accumulate d(loss)/dp twice: 2x the single call's.
    run = s.loops["first-twice-nothing-retain"]
    mine, fixed = step_one_norms(run), fixed_step_one_norms(run)
    assert set(mine) == set(fixed)
    for name, norm in fixed.items():
        assert mine[name] == pytest.approx(2 * norm, rel=1e-5)


def test_two_retained_backwards_equal_one_backward_on_the_sum(s):
    # Gradients are linear: d(a)/dp + d(b)/dp = d(a + b)/dp, at every step.
    run = s.loops["first-shared-nothing-retain"]
    for mine, fixed in zip(run.steps, run.fix.steps, strict=True):
        a = {g.name: g.norm for g in mine.grads}
        b = {g.name: g.norm for g in fixed.grads}
        assert a == pytest.approx(b, rel=1e-5)


def test_retained_rnn_raises_once_a_stepped_weight_is_needed(s):
    # Step 1's graph saves no weight (h0 needs no grad); step 2's saves weight_hh for the
    # gradient into h1; opt.step() then changes it in place, so step 3's backward fails.
    run = s.loops["later-one-rnn-retain"]
    assert run.raised_step == 3
    assert "modified by an inplace operation" in run.raised.message
