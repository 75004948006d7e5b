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


def test_operations_that_save_nothing_give_ones_then_twos(s):
    # d/dw sum(w + 1) = 1 for each element; a second backward adds another 1.
    assert grad(s, "nosave_twice", "w.grad after the first call:") == [1.0, 1.0, 1.0]
    assert grad(s, "nosave_twice", "w.grad after the second call:") == [2.0, 2.0, 2.0]


def test_full_history_gradient_of_the_retained_toy(s):
    # Step k's loss is (w^k - 0.1)^2; w.grad accumulates 2 (w^k - 0.1) k w^(k-1) over k = 1..4.
    w = 0.5
    expected = sum(2 * (w**k - 0.1) * k * w ** (k - 1) for k in range(1, 5))
    assert grad(s, "c2_retain_graph", "w.grad:") == pytest.approx([expected], rel=1e-6)


def test_cube_derivatives(s):
    x = [1.0, 2.0, 3.0]
    assert grad(s, "grad_create_graph", "first derivative:") == [3 * v**2 for v in x]
    assert grad(s, "grad_create_graph", "second derivative:") == [6 * v for v in x]


def test_jacobian_rows_of_product_and_square(s):
    # y = (x0 * x1, x0^2): rows (x1, x0) and (2 x0, 0) at x = (1, 2).
    x0, x1 = 1.0, 2.0
    assert grad(s, "jacobian_rows", "row 0:") == [x1, x0]
    assert grad(s, "jacobian_rows", "row 1:") == [2 * x0, 0.0]


def test_saved_tensors_are_e_to_the_x_and_b(s):
    saved = grad(s, "saved_tensors", "exp saved its output:")
    assert saved == pytest.approx([math.exp(1.0), math.exp(2.0)], rel=1e-6)
    assert grad(s, "saved_tensors", "mul saved b:") == [3.0, 4.0]
    assert f.printed_one(s, "saved_tensors", "mul saved x:") is None


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


def test_linear_regression_losses_follow_hand_written_sgd(s):
    # c1_fixed: nn.Linear(3, 1), MSE, SGD lr=0.1 on fixed data. Recompute each step's loss with
    # numpy and the closed-form gradient, starting from the same seeded weights and data.
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    w, b = model.weight.detach().double().numpy(), model.bias.detach().double().numpy()
    x, y = x.double().numpy(), y.double().numpy()
    expected = []
    for _ in range(3):
        err = x @ w.T + b - y
        expected.append(float((err**2).mean()))
        w = w - 0.1 * 2 * err.T @ x / len(x)
        b = b - 0.1 * 2 * err.sum(axis=0) / len(x)
    shown = list(f.per_step(s, "c1_fixed", "loss").values())
    assert shown == [round(v, 4) for v in expected]


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
