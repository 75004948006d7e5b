"""`--try` on scripts rebuilt from public reports, one per class where a plausible fix is wrong.

Every fix that passed its try is applied literally to a copy and run plainly under
tests/grad_probe.py; it must run and train every parameter the original trained.
"""

import shutil
from pathlib import Path

import pytest

from .test_diagnose_try import check_passed

# Scripts rebuilt from public reports by helpers who did not read the diagnoser, one for each
# class where a plausible fix is wrong (tests/diagnose_try/): whether a fix should pass its try.
TRY = Path(__file__).with_name("diagnose_try")
CLASSES = {
    "custom_function_inner_grad.py": True,  # retain_graph=True inside the Function's backward
    "checkpoint_reentrant_retain.py": True,  # use_reentrant=False
    "unrolled_learned_lr.py": True,  # w.detach().requires_grad_(), not w.detach()
    "lbfgs_style_targets.py": True,  # the loss modules' targets stored detached
    "compiled_kv_cache.py": True,  # both caches of the compiled module detached
    "sam_first_step_retain.py": False,  # retain_graph=True meets first_step's in-place update
    "hand_updated_attack_cache.py": False,  # no retain_graph=True over a stale cached pass
    # A learned table's cache stored detached: one step trains the table, then none does.
    "rotary_cached_freqs.py": False,
    # weight_norm's weight detached after the step: the decoder-only loss stops training it.
    "weightnorm_tied_decoder.py": False,
}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_no_fix_passes_that_raises_or_stops_training_when_applied(name, tmp_path):
    shutil.copy(TRY / name, tmp_path / name)
    check_passed(tmp_path, name, CLASSES[name])


def test_every_class_script_is_listed():
    assert sorted(p.name for p in TRY.glob("*.py")) == sorted(CLASSES)
