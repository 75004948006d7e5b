"""The "In frameworks" part: each framework's loop captured what the page says it does."""

import re

import pytest

from backtwice import claims
from backtwice import facts as f
from backtwice import snapshot as snap

from .conftest import SNAPSHOTS

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def newest():
    return snap.load_dir(SNAPSHOTS)[-1][1]


def test_compile_raises_the_donated_buffers_error_at_the_retained_call(newest):
    raised = newest.scenarios["fw_compile"].raised
    assert raised.type == "RuntimeError"
    assert "compiled with non-empty donated buffers" in raised.message
    assert raised.code == "loss1.backward(retain_graph=True)"
    # Step 1 (one backward, no retain_graph) ran: the error came on step 2.
    assert f.steps_printed(newest, "fw_compile") == [1, 2]


def test_ddp_two_backward_calls_leave_the_ranks_apart_and_the_sum_does_not(newest):
    assert newest.scenarios["fw_ddp"].raised is None
    rows = {row[0]: row for row in f.printed(newest, "fw_ddp", "step")}
    assert sorted(rows) == [1, 2]
    first, summed = rows[1], rows[2]
    assert not f.close(f.tensor(first[2]), f.tensor(first[4]))
    assert f.close(f.tensor(summed[2]), f.tensor(summed[4]))


def test_reentrant_checkpoint_refuses_autograd_grad_and_non_reentrant_runs(newest):
    raised = newest.scenarios["fw_checkpoint"].raised
    main = newest.scenarios[claims.MAIN].raised.message
    assert raised.message != main
    assert "use_reentrant=True" in raised.message and ".grad()" in raised.message
    assert "autograd.grad" in raised.code
    assert newest.scenarios["fw_checkpoint_fixed"].raised is None
    assert len(f.per_step(newest, "fw_checkpoint_fixed", "penalty")) == 3


def test_amp_scaled_backward_twice_raises_this_error(newest):
    raised = newest.scenarios["fw_amp"].raised
    assert raised.message == newest.scenarios[claims.MAIN].raised.message
    assert raised.code == "scaler.scale(loss).backward()"


def test_the_frameworks_table_links_each_loop_and_quotes_the_captured_messages(built_html, newest):
    part = re.search(r'<section id="frameworks".*?</section>', built_html, re.S).group(0)
    table = re.search(r"<table>.*?</table>", part, re.S).group(0)
    for ident in ("fw_compile", "fw_ddp", "fw_checkpoint", "fw_checkpoint_fixed", "fw_amp"):
        assert f'href="#s-{ident}"' in table
        assert f'id="s-{ident}"' in part
    for ident in ("fw_compile", "fw_checkpoint"):
        head = newest.scenarios[ident].raised.message.split(". ")[0]
        assert f"<q>{head}</q>" in table
