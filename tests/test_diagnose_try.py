"""Fixes as edits: `--try` runs the script again with each, `--fix` writes one that passed.

A fix's verdict is checked apart from the diagnoser: its edits are applied literally to a copy
of the script, which runs plainly under tests/grad_probe.py, and must run and train every
parameter the original trained before the error.
"""

import ast
import json
import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from backtwice import diagnose

from . import warm
from .diagnose_markers import CASES, RAISING, applied

PROBE = Path(__file__).with_name("grad_probe.py")
# A case for each common kind of edit the diagnoser writes; bench/try_cases.py runs them all.
SAMPLE = ["lstm.py", "dict_bank.py", "same_loss_helper.py", "multitask.py", "before_loop.py"]
# And one for each edit made of two: the pass again with its first input detached (a GAN), the
# value detached with the shared layers kept (an actor-critic), one backward of the sum (one
# optimizer), saved tensors read before the call that frees them.
SAMPLE += [
    "gan_reused_score.py",
    "ac_shared_trunk_two_opts.py",
    "multitask_retain_step.py",
    "saved_attr.py",
]
# And edits that move or rewrite code: a tensor an object computes once in __init__ becomes a
# property, a loss built outside an L-BFGS closure is computed in it too.
SAMPLE += ["mask_in_init.py", "lbfgs_closure.py"]
# And one whose calls are torch.autograd.grad's, which the try's tracker counts too.
SAMPLE += ["pinn_two_grads.py"]


def diagnose_try(folder, script, *flags):
    """`python diagnose.py FLAGS --json R SCRIPT` in a fork of the warm interpreter
    (tests/warm.py); each try it makes is a process of its own, as a reader's is."""
    report = folder / "report.json"
    process = warm.run([diagnose.__file__, *flags, "--json", str(report), script], folder)
    return process, json.loads(report.read_text(encoding="utf-8"))


def probe(folder, script):
    """`python tests/grad_probe.py SCRIPT`, in a fork of the warm interpreter."""
    process = warm.run([str(PROBE), script], folder)
    return json.loads(process.stdout.splitlines()[-1])


def passed(report):
    """The fixes whose try passed, in the report's order."""
    return [f for f in report["fixes"] if f["tried"]["outcome"] == "passed"]


def outcomes(report):
    """Each edit's new text, stripped, and the outcome of its fix's try."""
    return {e["new"].strip(): f["tried"]["outcome"] for f in report["fixes"] for e in f["edits"]}


def check_passed(folder, name, should_pass):
    """Run --try; every fix that passed, applied literally, runs plainly and trains as before.
    Return the report."""
    before = (folder / name).read_bytes()
    _, report = diagnose_try(folder, name, "--try")
    assert (folder / name).read_bytes() == before  # --try writes nothing
    worked = passed(report)
    assert bool(worked) == should_pass, [(f["why"], f["tried"]) for f in report["fixes"]]
    original = probe(folder, name)
    assert original["error"]  # a compiled region's is torch._dynamo's BackendCompilerFailed
    for fix in worked:
        assert fix["applicability"] == "machine" and {e["file"] for e in fix["edits"]} == {name}
        (folder / "fixed.py").write_text(applied(before.decode(), fix["edits"]))
        fixed = probe(folder, "fixed.py")
        assert fixed["error"] is None, (fix["diff"], fixed)
        assert set(original["trained"]) <= set(fixed["trained"]), fix["diff"]
    return report


@pytest.mark.parametrize("name", SAMPLE)
def test_a_fix_that_passed_its_try_runs_and_trains_when_applied_literally(name, tmp_path):
    assert name in RAISING
    shutil.copy(CASES / name, tmp_path / name)
    check_passed(tmp_path, name, True)


@pytest.fixture(scope="module")
def no_fix_passes(tmp_path_factory):
    """A script whose one machine fix raises: the first loss's graph is needed by the next."""
    folder = tmp_path_factory.mktemp("nofix")
    (folder / "train.py").write_text(
        "import torch\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Linear(4, 4)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "h = torch.zeros(1, 4)\n"
        "for step in range(3):\n"
        "    h = torch.tanh(model(h))\n"
        "    loss = h.pow(2).sum()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    if step == 1:\n"
        "        raise ValueError('the fixed run ends here too')\n"
    )
    return folder


def test_fix_writes_the_first_fix_that_passed(tmp_path):
    shutil.copy(CASES / "lstm.py", tmp_path / "lstm.py")
    text = (tmp_path / "lstm.py").read_text()
    process, report = diagnose_try(tmp_path, "lstm.py", "--fix")
    first = next(f for f in report["fixes"] if f["tried"]["outcome"] == "passed")
    assert (tmp_path / "lstm.py").read_text() == applied(text, first["edits"])
    assert "--fix wrote fix 1 into lstm.py" in process.stderr
    assert probe(tmp_path, "lstm.py")["error"] is None


def test_fix_writes_nothing_when_no_fix_passed(no_fix_passes):
    before = (no_fix_passes / "train.py").read_bytes()
    process, report = diagnose_try(no_fix_passes, "train.py", "--fix")
    outcomes = [f["tried"]["outcome"] for f in report["fixes"]]
    assert outcomes and "passed" not in outcomes and "raised" in outcomes
    assert "ValueError: the fixed run ends here too" in str(report["fixes"])
    assert (no_fix_passes / "train.py").read_bytes() == before
    assert "--fix: no fix passed its try; nothing was written" in process.stderr


def test_a_try_that_times_out_is_said_and_writes_nothing(no_fix_passes, monkeypatch, capsys):
    monkeypatch.setattr(diagnose, "TRY_BASE", 0.0)
    monkeypatch.setattr(diagnose, "TRY_FACTOR", 0.0)
    before = (no_fix_passes / "train.py").read_bytes()
    monkeypatch.chdir(no_fix_passes)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    code = diagnose.main(["--fix", "--json", "report.json", "train.py"])
    report = json.loads((no_fix_passes / "report.json").read_text())
    assert code == 1
    assert {f["tried"]["outcome"] for f in report["fixes"] if f["applicability"] == "machine"} == {
        "timed out"
    }
    assert (no_fix_passes / "train.py").read_bytes() == before
    assert "nothing was written" in capsys.readouterr().err


def test_without_try_the_report_offers_the_command_and_marks_fixes_not_tried(tmp_path):
    shutil.copy(CASES / "lstm.py", tmp_path / "lstm.py")
    process, report = diagnose_try(tmp_path, "lstm.py")
    assert {f["tried"]["outcome"] for f in report["fixes"]} == {"not tried"}
    last = process.stderr.rstrip().splitlines()[-1]
    assert last.endswith(f"python {diagnose.__file__} --try lstm.py")  # the file, as it was run
    assert "+    state = tuple(s.detach() for s in state)" in process.stderr


def test_a_passing_fix_goes_before_one_that_passed_with_an_edit_more():
    def fix(lines, outcome="passed"):
        edits = [{"file": "t.py", "start": n, "end": n, "new": "x\n"} for n in lines]
        return {"edits": edits, "tried": {"outcome": outcome}, "name": lines}

    fixes = [fix([3, 7]), fix([3], "raised"), fix([9]), fix([7]), fix([3, 7, 9])]
    diagnose._smallest_first(fixes)
    assert [f["name"] for f in fixes] == [[7], [3, 7], [3], [9], [3, 7, 9]]


def test_each_read_detached_in_one_edit_a_line(tmp_path):
    import ast

    path = tmp_path / "m.py"
    path.write_text("a = self.c[i] @ self.c.t()\nb = (self.c,)\n", encoding="utf-8")
    nodes = [
        n
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(n, ast.Attribute) and n.attr == "c"
    ]
    edits = diagnose._each_detached(str(path), nodes)
    assert [e["new"] for e in edits] == [
        "a = self.c.detach()[i] @ self.c.detach().t()\n",
        "b = (self.c.detach(),)\n",
    ]
    assert [(e["start"], e["end"]) for e in edits] == [(1, 1), (2, 2)]


def test_a_statement_is_inserted_only_where_its_names_are_bound(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "def step(model, logits):\n"
        "    loss = logits.sum()\n"
        "    return loss\n"
        "def fit(model):\n"
        "    for _ in range(3):\n"
        "        out = model(1)\n"
        "        step(model, out)\n"
        "fit(None)\n",
        encoding="utf-8",
    )
    bound = {
        (line, name): diagnose._binds(str(path), line, name)
        for line in (2, 7, 8)
        for name in ("logits", "out", "model", "loss")
    }
    assert {k for k, v in bound.items() if v} == {
        (2, "logits"),
        (2, "model"),
        (2, "loss"),
        (7, "out"),
        (7, "model"),
    }


def test_the_pass_is_computed_again_before_the_first_line_the_second_loss_reads_it_from(tmp_path):
    import ast

    path = tmp_path / "m.py"
    path.write_text(
        "fake = G(z)\n"
        "g = adv(D(fake)[0]).backward()\n"
        "opt_g.step()\n"
        "d_fake = D(fake.detach())[0]\n"
        "_, code = D(fake)\n"
        "info = loss(code, c)\n",
        encoding="utf-8",
    )
    last = ast.parse(path.read_text()).body[-1]
    assert diagnose._first_read(str(path), "fake", 3, last).lineno == 5
    assert diagnose._first_read(str(path), "z", 3, last) is last


@pytest.mark.parametrize(
    ("line", "target"),
    [
        ("F.kl_div(F.log_softmax(model(x), 1), pu, reduction='batchmean')", True),
        ("criterion(model(x), target=pu)", True),
        ("F.mse_loss(pu, y)", False),
        ("(model(x) * pu).sum()", False),
    ],
)
def test_a_tensor_given_to_a_loss_as_its_target_is_one(line, target, tmp_path):
    path = tmp_path / "m.py"
    path.write_text(f"pu = pseudo[0:8]\nloss = {line}\n", encoding="utf-8")
    assert diagnose._loss_target(str(path), "pseudo") == target


def test_a_bank_written_by_key_is_stored_detached_where_it_is_written(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "class T:\n"
        "    def ref(self, key, x):\n"
        "        self.cache[key] = (f(x), g(x))\n"
        "        other[key] = f(x)\n"
        "        return self.cache[key]\n",
        encoding="utf-8",
    )
    stores = diagnose._item_stores(str(path), "trainer.cache")
    assert [n.lineno for n in stores] == [3]
    edit = diagnose._detached(str(path), stores[0].value)
    assert edit["new"] == "        self.cache[key] = (f(x).detach(), g(x).detach())\n"


# Negatives from earlier batches, the list rebuilt after the optimizer step: a detach right
# after the backward is undone by the rebuild, which adds this batch's embeddings with their
# graph; detaching where the step last builds the list is the fix.
QUEUE_REBUILT = """\
import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
queries, keys = nn.Linear(6, 8), nn.Linear(6, 8)
opt = torch.optim.Adam([*queries.parameters(), *keys.parameters()], lr=0.01)
negatives = []
for step in range(4):
    x = torch.randn(5, 6)
    q, k = F.normalize(queries(x), dim=1), F.normalize(keys(x + 0.1), dim=1)
    scores = q @ torch.cat([k, *negatives]).T
    loss = F.cross_entropy(scores, torch.arange(5))
    opt.zero_grad()
    loss.backward()
    opt.step()
    negatives = (negatives + [k])[-2:]
"""


def test_a_list_rebuilt_after_the_step_is_detached_where_it_is_rebuilt(tmp_path):
    (tmp_path / "train.py").write_text(QUEUE_REBUILT, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    tried = {
        (e["start"], e["new"]): f["tried"]["outcome"] for f in report["fixes"] for e in f["edits"]
    }
    detach = "    negatives = [x.detach() for x in negatives]\n"
    assert tried == {(16, detach): "raised", (18, detach): "passed"}


# A replay of past outputs that the loss samples from, appended to before the sample, so it
# holds this step's new tensor beside old ones: emptying it after each update would pass the
# try and throw the replay away. The script keeps it on purpose (samples it, cuts it to its
# last items), so no fix empties it and none passes: the report says what to decide.
REPLAY = """\
import random

import torch
from torch import nn

random.seed(0)
torch.manual_seed(0)
teacher, student = nn.Linear(5, 3), nn.Linear(5, 3)
opt = torch.optim.SGD([*teacher.parameters(), *student.parameters()], lr=0.05)
replay = []
for step in range(4):
    x = torch.randn(8, 5)
    replay.append((x, teacher(x).softmax(1)))
    if len(replay) > 6:
        replay.pop(0)
    batch = random.sample(replay, min(3, len(replay)))
    loss = sum(-(p * student(xb).log_softmax(1)).sum(1).mean() for xb, p in batch)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_list_the_script_samples_from_is_never_emptied_by_a_fix(tmp_path):
    (tmp_path / "train.py").write_text(REPLAY, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", False)
    assert report["cause"] == "carried-state"
    assert not [e for f in report["fixes"] for e in f["edits"] if ".clear()" in e["new"]]
    assert report["fix"].startswith("`replay` is read again in later steps")


# REINFORCE whose log-probabilities are emptied with `del log_probs[:]` only when it logs: a
# whole-slice delete empties the list, it does not keep the last items, so the list is this
# update's losses and the fix empties it after each update (tool_s38 offered only a manual fix).
EMPTIED_WHEN_LOGGED = """\
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
log_probs, rewards = [], []
for episode in range(4):
    for t in range(5):
        m = Categorical(logits=policy(torch.randn(4)))
        action = m.sample()
        log_probs.append(m.log_prob(action))
        rewards.append(0.5 + float(action))
    returns = torch.tensor(rewards).cumsum(0).flip(0)
    loss = -sum(lp * r for lp, r in zip(log_probs, returns))
    opt.zero_grad()
    loss.backward()
    opt.step()
    del rewards[:]
    if episode % 10 == 0:
        print(episode, loss.item())
        del log_probs[:]
"""


def test_a_list_emptied_by_a_whole_slice_delete_is_emptied_by_the_fix(tmp_path):
    (tmp_path / "train.py").write_text(EMPTIED_WHEN_LOGGED, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    assert report["cause"] == "carried-state"
    first = passed(report)[0]
    assert [e["new"] for e in first["edits"]] == ["    log_probs.clear()\n"], first["diff"]


# An LSTM cell that keeps its (h, c) tuple on itself, made when it is None, and never reset
# between batches: a tuple's items cannot be assigned, so the detach rebuilds the tuple, and
# the module's own None start is offered for batches that are sequences of their own.
STATE_TUPLE = """\
import torch
from torch import nn

torch.manual_seed(0)


class Tracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(3, 6)
        self.state = None

    def forward(self, xs):
        outs = []
        for x in xs:
            if self.state is None:
                self.state = (x.new_zeros(len(x), 6), x.new_zeros(len(x), 6))
            self.state = self.cell(x, self.state)
            outs.append(self.state[0])
        return torch.stack(outs)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.tracker = Tracker()
        self.head = nn.Linear(6, 1)

    def forward(self, xs):
        return self.head(self.tracker(xs))


model = Model()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for batch in range(3):
    xs, ys = torch.randn(4, 2, 3), torch.randn(4, 2, 1)
    loss = nn.functional.mse_loss(model(xs), ys)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_tuple_kept_on_a_module_is_detached_whole_or_started_afresh(tmp_path):
    (tmp_path / "train.py").write_text(STATE_TUPLE, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    new = outcomes(report)
    whole = "model.tracker.state = tuple(s.detach() for s in model.tracker.state)"
    assert new.get(whole) == "passed", report["fixes"]
    assert new.get("model.tracker.state = None") == "passed", report["fixes"]
    targets = [t for x in new for n in ast.parse(x).body for t in getattr(n, "targets", [])]
    assert not [t for t in targets if isinstance(t, (ast.Tuple, ast.Subscript))], new


# A recurrent model whose forward collects each step's output in a list it makes on every call
# and hands its last state back to the loop, which passes it in again: the list holds one call's
# outputs, and the carrier is the state the loop keeps (tool_s39 named the list and stored its
# items detached, which raised).
LOCAL_LIST = """\
import torch
from torch import nn

torch.manual_seed(0)


class Smoother(nn.Module):
    def __init__(self):
        super().__init__()
        self.rate = nn.Parameter(torch.tensor(0.3))
        self.head = nn.Linear(5, 1)

    def forward(self, xs, level):
        preds = []
        for x in xs:
            level = level + torch.sigmoid(self.rate) * (x - level)
            preds.append(self.head(level))
        return torch.stack(preds), level


model = Smoother()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
level = torch.zeros(5)
for chunk in range(3):
    xs, ys = torch.randn(6, 5), torch.randn(6, 1)
    out, level = model(xs, level)
    loss = nn.functional.mse_loss(out, ys)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_list_its_function_makes_on_every_call_is_not_the_carrier(tmp_path):
    (tmp_path / "train.py").write_text(LOCAL_LIST, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    assert "`preds`" not in report["fix"], report["fix"]
    first = passed(report)[0]
    assert [e["new"].strip() for e in first["edits"]] == ["level = level.detach()"], first["diff"]


# Two running sums a module updates from themselves in one forward, and a step counter beside
# them: the detach takes both sums (one alone leaves the next step to raise on the other) and
# never the counter, an int.
TWO_SUMS = """\
import torch
from torch import nn

torch.manual_seed(0)


class Memory(nn.Module):
    def __init__(self):
        super().__init__()
        self.key = nn.Linear(4, 4)
        self.total = torch.zeros(4)
        self.weight = torch.zeros(())
        self.calls = 0

    def forward(self, x):
        k = torch.sigmoid(self.key(x))
        self.total = self.total + (k * x).sum(0)
        self.weight = self.weight + k.sum()
        self.calls = self.calls + 1
        return x + self.total / (self.weight + 1.0)


model = nn.Sequential(Memory(), nn.Linear(4, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_states_a_forward_updates_together_are_detached_together(tmp_path):
    (tmp_path / "train.py").write_text(TWO_SUMS, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    first = passed(report)[0]
    (edit,) = first["edits"]
    assert "model[0].total.detach()" in edit["new"] and "model[0].weight.detach()" in edit["new"]
    assert "calls" not in edit["new"], first["diff"]


# A decoder that sums its attention over steps into a tensor `__init__` makes and no batch
# resets: beside the detach, the tool offers to start each step as `__init__` does, where that
# reads nothing of `__init__`'s own (`WIDTH`, a global, yes; the argument `width`, no).
SUMMED = """\
import torch
from torch import nn

torch.manual_seed(0)
WIDTH = 6


class Decoder(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.score = nn.Linear(width, width)
        self.seen = torch.zeros(WIDTH)

    def forward(self, x):
        attn = torch.softmax(self.score(x) - self.seen, dim=-1)
        self.seen = self.seen + attn.mean(0)
        return (attn * x).sum(-1, keepdim=True)


model = Decoder(WIDTH)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in range(3):
    x, y = torch.randn(5, WIDTH), torch.randn(5, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("start", ["WIDTH", "width"])
def test_a_state_init_makes_is_started_afresh_only_from_what_the_loop_can_read(tmp_path, start):
    script = SUMMED.replace("torch.zeros(WIDTH)", f"torch.zeros({start})")
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    new = outcomes(report)
    assert new.get("model.seen = model.seen.detach()") == "passed", new
    assert new.get("model.seen = torch.zeros(WIDTH)") == ("passed" if start == "WIDTH" else None)
    assert "model.seen = torch.zeros(width)" not in new


# A layer that computes two tensors once in `__init__` from its own parameters and reads both in
# forward: the property fix takes both (one alone leaves the next step to raise on the other).
TWO_IN_INIT = """\
import torch
from torch import nn

torch.manual_seed(0)


class Scaled(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.raw = nn.Parameter(torch.randn(n, n) * 0.3)
        self.gain = nn.Parameter(torch.ones(n))
        self.weight = self.raw * self.gain
        self.shift = torch.tanh(self.gain)

    def forward(self, x):
        return x @ self.weight + self.shift


model = nn.Sequential(Scaled(4), nn.ReLU(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_tensors_init_computes_from_parameters_become_properties_together(tmp_path):
    (tmp_path / "train.py").write_text(TWO_IN_INIT, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    first = passed(report)[0]
    assert first["why"].startswith("Compute `model[0].weight` and `model[0].shift` in each"), first
    added = "".join(e["new"] for e in first["edits"])
    assert "def weight(self)" in added and "def shift(self)" in added, first["diff"]


# A trainer that keeps its cell's state on itself and steps through time in a loop: the detach
# "where the next forward pass reads it" goes before the pass's first read of the state, and so
# before the loop around it; inside the loop it would cut each step from the one before.
TIME_LOOP = """\
import torch
from torch import nn

torch.manual_seed(0)


class Trainer:
    def __init__(self):
        self.cell, self.head = nn.RNNCell(3, 5), nn.Linear(5, 1)
        params = [*self.cell.parameters(), *self.head.parameters()]
        self.opt = torch.optim.SGD(params, lr=0.05)
        self.h = torch.zeros(2, 5)

    def step(self, xs):
        total = 0
        for x in xs:
            self.h = self.cell(x, self.h)
            total = total + self.head(self.h).pow(2).mean()
        self.opt.zero_grad()
        total.backward()
        self.opt.step()


trainer = Trainer()
for batch in range(3):
    trainer.step(torch.randn(4, 2, 3))
"""


def test_a_detach_where_the_forward_reads_a_state_goes_before_its_time_loop(tmp_path):
    (tmp_path / "train.py").write_text(TIME_LOOP, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    (fix,) = [f for f in report["fixes"] if "where the next forward pass reads it" in f["why"]]
    assert TIME_LOOP.splitlines()[15].strip() == "for x in xs:"
    assert fix["edits"] == [
        {
            "file": "train.py",
            "start": 16,
            "end": 15,
            "new": "        if self.h is not None:\n            self.h = self.h.detach()\n",
        }
    ], fix["diff"]


# One forward for the batch, then one backward per example through it, called from a helper
# whose name ends in `step`: the loop picks another part of one output each pass (a shared
# forward, not one loss twice), and no optimizer calls the helper back.
PER_EXAMPLE = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def clipped_step(losses):
    total = [torch.zeros_like(p) for p in model.parameters()]
    for i in range(len(losses)):
        opt.zero_grad()
        losses[i].backward()
        for t, p in zip(total, model.parameters()):
            t.add_(p.grad.clamp(-1, 1))
    for t, p in zip(total, model.parameters()):
        p.grad = t / len(losses)
    opt.step()


for step in range(2):
    x = torch.randn(4, 3)
    clipped_step((model(x) - 1).pow(2).squeeze(1))
"""


def test_a_loss_the_loop_picks_is_a_shared_forward_and_not_read_as_a_closure(tmp_path):
    (tmp_path / "train.py").write_text(PER_EXAMPLE, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    assert report["raised"]["line"] == 13 and report["cause"] == "shared-forward"
    (machine,) = [f for f in report["fixes"] if f["applicability"] == "machine"]
    assert machine["edits"] == [
        {
            "file": "train.py",
            "start": 13,
            "end": 13,
            "new": "        losses[i].backward(retain_graph=True)\n",
        }
    ]
    assert machine["tried"]["outcome"] == "passed"
    assert all("LBFGS" not in f["why"] for f in report["fixes"]), report["fixes"]


def test_the_same_loss_once_per_optimizer_goes_back_once_before_the_loop(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "for i in range(2):\n    opt.zero_grad()\n    losses[i].backward()\n    opt.step()\n",
        encoding="utf-8",
    )
    assert diagnose._fix_split_loop(types.SimpleNamespace(kfile=str(path), kline=3)) is None
    path = tmp_path / "n.py"
    path.write_text(
        "for opt in opts:\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n",
        encoding="utf-8",
    )
    fix = diagnose._fix_split_loop(types.SimpleNamespace(kfile=str(path), kline=3))
    assert fix["edits"][0]["new"] == (
        "for opt in opts:\n    opt.zero_grad()\nloss.backward()\nfor opt in opts:\n    opt.step()\n"
    )


# A trainer class whose method calls backward, and a module the script also holds by a global
# name that caches what it computes from its weights on first use: the state is named from the
# trainer's frame (`self.net[0].table`), so the fix goes after the backward in the loop (0d4db41
# named the global `encoder.table` and put every fix after the trainer's call at the end of the
# script, where it came too late).
TRAINER_CACHE = """\
import torch
from torch import nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.mix = nn.Linear(6, 6)
        self.table = None

    def forward(self, ids):
        if self.table is None:
            self.table = torch.tanh(self.mix(self.emb.weight))
        return self.table[ids]


class Trainer:
    def __init__(self, net, opt):
        self.net, self.opt = net, opt

    def fit(self, epochs):
        for epoch in range(epochs):
            ids, y = torch.randint(0, 10, (8,)), torch.randn(8, 1)
            loss = nn.functional.mse_loss(self.net(ids), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


encoder = Encoder()
net = nn.Sequential(encoder, nn.Linear(6, 1))
Trainer(net, torch.optim.SGD(net.parameters(), lr=0.1)).fit(3)
"""


def test_a_state_is_named_from_the_frame_that_calls_backward(tmp_path):
    (tmp_path / "train.py").write_text(TRAINER_CACHE, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    new = outcomes(report)
    assert new.get("self.net[0].table = None") == "passed", report["fixes"]
    assert not [x for x in new if x.startswith("encoder.table")], new


# Two critics a helper steps in turn, each given as its argument `critic`: a parameter is named
# by what the script keeps (`trainer.critic_x.0.weight`), not by the argument, which is one
# critic at one call and the other at the next. 2f7caf1 named them `critic.*` and judged the
# detached fake, which trains both critics, "no gradient".
TWO_CRITICS = """\
import torch
from torch import nn

torch.manual_seed(0)


class TwoCritics:
    def __init__(self):
        self.gen = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6))
        self.critic_x = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
        self.critic_y = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
        critics = list(self.critic_x.parameters()) + list(self.critic_y.parameters())
        self.opt_g = torch.optim.Adam(self.gen.parameters(), lr=1e-3)
        self.opt_c = torch.optim.Adam(critics, lr=1e-3)

    def critic_step(self, critic, real, fake):
        soft = nn.functional.softplus
        loss = soft(critic(fake)).mean() + soft(-critic(real)).mean()
        loss.backward()

    def train_step(self, z, real_x, real_y):
        fake_x, fake_y = self.gen(z).chunk(2, dim=1)
        self.opt_g.zero_grad()
        (-self.critic_x(fake_x).mean() - self.critic_y(fake_y).mean()).backward()
        self.opt_g.step()
        self.opt_c.zero_grad()
        self.critic_step(self.critic_x, real_x, fake_x)
        self.critic_step(self.critic_y, real_y, fake_y)
        self.opt_c.step()


trainer = TwoCritics()
for step in range(3):
    trainer.train_step(torch.randn(5, 4), torch.randn(5, 3), torch.randn(5, 3))
"""


def test_a_parameter_is_named_by_what_keeps_it_not_by_an_argument(tmp_path):
    (tmp_path / "train.py").write_text(TWO_CRITICS, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    new = outcomes(report)
    detached = "loss = soft(critic(fake.detach())).mean() + soft(-critic(real)).mean()"
    assert new.get(detached) == "passed", report["fixes"]


def test_no_function_of_the_diagnoser_is_longer_than_80_lines():
    import ast

    tree = ast.parse(Path(diagnose.__file__).read_text(encoding="utf-8"))
    long = {
        n.name: n.end_lineno - n.lineno + 1
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno >= 80
    }
    assert long == {}


WHERE_IT_RUNS = """\
import json, os, signal, sys
import torch
{setup}
facts = {{
    "pid": os.getpid(),
    "parent": os.getppid(),
    "cwd": os.getcwd(),
    "argv": sys.argv,
    "path0": sys.path[0],
    "stdin": sys.stdin.read(),
    "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    "env": {{k: v for k, v in os.environ.items() if not k.startswith("BACKTWICE")}},
}}
os.makedirs("facts", exist_ok=True)
with open(os.path.join("facts", str(os.getpid()) + ".json"), "w") as out:
    json.dump(facts, out)
torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
h = torch.zeros(1, 4)
for step in range(3):
    h = torch.tanh(model(h))
    loss = h.pow(2).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(
    ("setup", "forked"),
    [("", True), ("os.environ['OMP_NUM_THREADS'] = '2'  # read as a process starts", False)],
    ids=["forked", "fresh"],
)
def test_a_try_runs_where_and_as_a_fresh_process_would(setup, forked, tmp_path):
    # On Linux a try is forked from a process that imported torch as the run started (no
    # second import); where the script changed a variable read as a process starts, it is a
    # fresh process. Either way the script sees what a fresh `python diagnose.py train.py`
    # started by the run would show it, and nothing of the forking is left once the run ends.
    (tmp_path / "train.py").write_text(WHERE_IT_RUNS.format(setup=setup), encoding="utf-8")
    _, report = diagnose_try(tmp_path, "train.py", "--try")
    assert report["fixes"][0]["tried"]["outcome"] == "passed"
    written = sorted((tmp_path / "facts").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    run, *tries = [json.loads(p.read_text()) for p in written]  # the tries start once it ended
    assert tries
    for tried in tries:
        assert {k: v for k, v in tried.items() if k not in ("pid", "parent")} == {
            k: v for k, v in run.items() if k not in ("pid", "parent")
        }
        assert (tried["parent"] != run["pid"]) == forked
        if forked:
            with pytest.raises(ProcessLookupError):
                os.kill(tried["parent"], 0)


# ---- session 41: classes met in the fresh sets d10 and d11 (scripts of my own, not theirs) ----
# A critic's line runs again on the real batch after the generator's backward, in the same
# step (no optimizer stepped between): one pass read by two losses, not a state carried from
# an earlier step. 7acfe26 said carried-state and offered only `fake_h = fake_h.detach()`.
FEATURE_MATCH = """\
import torch
from torch import nn

torch.manual_seed(0)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 16)
        self.out = nn.Linear(16, 1)

    def forward(self, x, features=False):
        h = torch.relu(self.body(x))
        return (self.out(h), h) if features else self.out(h)


def feature_match(fake_h, real_h):
    loss = (fake_h.mean(0) - real_h.mean(0)).pow(2).sum()
    loss.backward()
    return loss.item()


gen = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 6))
critic = Critic()
opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)
soft = nn.functional.softplus
for step in range(3):
    real = torch.randn(8, 6)
    opt_c.zero_grad()
    loss_c = soft(critic(gen(torch.randn(8, 4)).detach())).mean() + soft(-critic(real)).mean()
    loss_c.backward()
    opt_c.step()
    opt_g.zero_grad()
    score, fake_h = critic(gen(torch.randn(8, 4)), features=True)
    adv = soft(-score).mean()
    adv.backward()
    _, real_h = critic(real, features=True)
    feature_match(fake_h, real_h.detach())
    opt_g.step()
"""


def test_a_line_run_again_in_the_same_step_is_one_pass_read_twice(tmp_path):
    (tmp_path / "train.py").write_text(FEATURE_MATCH, encoding="utf-8")
    _, report = diagnose_try(tmp_path, "train.py", "--try")
    assert report["cause"] == "shared-forward", report["fix"]
    assert outcomes(report).get("adv.backward(retain_graph=True)") == "passed", report["fixes"]


# A stack of recurrent cells keeps one state per layer in a list on the module, beside a
# summary: detaching the states found (the summary, the list as if it were a tensor) raised on
# 7acfe26; every state the module keeps, each list item by item, is detached together.
STACKED_STATE = """\
import torch
from torch import nn

torch.manual_seed(0)


class Stacked(nn.Module):
    def __init__(self, sizes=(5, 8, 8)):
        super().__init__()
        self.cells = nn.ModuleList(nn.GRUCell(a, b) for a, b in zip(sizes, sizes[1:]))
        self.head = nn.Linear(sizes[-1], 1)
        self.hidden = None
        self.summary = None

    def forward(self, seq):
        if self.summary is None:
            self.hidden = [torch.zeros(seq.shape[1], c.hidden_size) for c in self.cells]
            self.summary = torch.zeros(seq.shape[1], self.cells[-1].hidden_size)
        for x in seq:
            for i, cell in enumerate(self.cells):
                self.hidden[i] = cell(x, self.hidden[i])
                x = self.hidden[i]
            self.summary = 0.9 * self.summary + 0.1 * x
        return self.head(self.summary)


model = Stacked()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for batch in range(3):
    seq, target = torch.randn(4, 2, 5), torch.randn(2, 1)
    loss = nn.functional.mse_loss(model(seq), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_every_state_a_module_keeps_is_detached_together_a_list_item_by_item(tmp_path):
    (tmp_path / "train.py").write_text(STACKED_STATE, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    both = (
        "model.hidden, model.summary = [s.detach() for s in model.hidden], model.summary.detach()"
    )
    assert outcomes(report).get(both) == "passed", report["fixes"]


# A memory written a row at a time (`self.feats[i] = row`) with each step's embeddings: the
# rows are stored detached where they are written. 7acfe26 saw only whole assignments.
ROW_MEMORY = """\
import torch
from torch import nn

torch.manual_seed(0)


class Memory:
    def __init__(self, size, dim):
        self.feats = torch.zeros(size, dim)
        self.filled = 0

    def write(self, feats):
        for row in feats:
            self.feats[self.filled % len(self.feats)] = row
            self.filled += 1

    def read(self, k):
        n = min(self.filled, len(self.feats))
        return self.feats[torch.randint(0, n, (k,))]


encoder = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 6))
opt = torch.optim.Adam(encoder.parameters(), lr=1e-3)
memory = Memory(32, 6)
for step in range(4):
    x = torch.randn(8, 10)
    emb = encoder(x)
    loss = emb.pow(2).mean()
    if memory.filled:
        loss = loss + 0.1 * torch.cdist(emb, memory.read(8)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    memory.write(emb)
"""


def test_a_memory_written_a_row_at_a_time_stores_its_rows_detached(tmp_path):
    (tmp_path / "train.py").write_text(ROW_MEMORY, encoding="utf-8")
    _, report = diagnose_try(tmp_path, "train.py", "--try")
    stored = "self.feats[self.filled % len(self.feats)] = row.detach()"
    assert outcomes(report).get(stored) == "passed", report["fixes"]


# An inner refinement loop hands two names to its next pass (`pose` and `feat`): a detach of
# one leaves the other's graph, which the next backward goes into (7acfe26's only fix).
POSE_REFINE = """\
import torch
from torch import nn

torch.manual_seed(0)


class Refiner(nn.Module):
    def __init__(self):
        super().__init__()
        self.update = nn.Sequential(nn.Linear(11, 8), nn.Tanh())
        self.delta = nn.Linear(8, 3)


refiner = Refiner()
opt = torch.optim.Adam(refiner.parameters(), lr=1e-3)
for batch in range(3):
    opt.zero_grad()
    pose, feat = torch.zeros(4, 3), torch.zeros(4, 8)
    target = torch.randn(4, 3)
    for it in range(3):
        feat = refiner.update(torch.cat([pose, feat], 1))
        pose = pose + refiner.delta(feat)
        loss = (pose - target).pow(2).mean()
        loss.backward()
    opt.step()
"""


def test_names_a_loop_hands_to_its_next_pass_are_detached_together(tmp_path):
    (tmp_path / "train.py").write_text(POSE_REFINE, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    new = outcomes(report)
    assert new.get("pose = pose.detach()") == "raised", new
    assert new.get("pose, feat = pose.detach(), feat.detach()") == "passed", new


# Early exits distilled from the final exit, one backward per exit in a loop after the final
# loss's: retain_graph=True on the first call alone raises at the loop's second pass, so the
# graph is kept at both calls (7acfe26 offered only the first).
EXIT_DISTILL = """\
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class EarlyExit(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(12, 12) for _ in range(3)])
        self.exits = nn.ModuleList([nn.Linear(12, 4) for _ in range(3)])

    def forward(self, x):
        outs = []
        for block, exit_ in zip(self.blocks, self.exits):
            x = torch.relu(block(x))
            outs.append(exit_(x))
        return outs


model = EarlyExit()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(3):
    x, y = torch.randn(16, 12), torch.randint(0, 4, (16,))
    opt.zero_grad()
    *early, final = model(x)
    loss = F.cross_entropy(final, y)
    loss.backward()
    for logits in early:
        kd = F.kl_div(F.log_softmax(logits, 1), F.softmax(final, 1), reduction="batchmean")
        kd.backward()
    opt.step()
"""


def test_a_second_loss_in_a_loop_of_its_own_keeps_the_graph_at_both_calls(tmp_path):
    (tmp_path / "train.py").write_text(EXIT_DISTILL, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    both = [f for f in report["fixes"] if len(f["edits"]) == 2]
    assert [e["new"].strip() for e in both[0]["edits"]] == [
        "loss.backward(retain_graph=True)",
        "kd.backward(retain_graph=True)",
    ]
    assert both[0]["tried"]["outcome"] == "passed", report["fixes"]


def test_a_value_computed_again_binds_only_its_own_name_of_a_tuple(tmp_path):
    # `logits, loss = model(X, Y)` copied to compute `logits` again after a step leaves `loss`
    # as it was (`logits, _ = ...`), and the loop's own assignment is copied, not the model's
    # `logits = ...` inside forward, whose names the loop does not have.
    path = tmp_path / "train.py"
    path.write_text(
        "class M:\n"
        "    def forward(self, x):\n"
        "        logits = self.head(x)\n"
        "        return logits, 0\n"
        "\n"
        "\n"
        "for step in range(3):\n"
        "    logits, loss = model(X, Y)\n"
        "    loss.backward()\n"
        "    if step:\n"
        "        probe = f(logits)\n",
        encoding="utf-8",
    )
    tree = diagnose._parse(str(path))
    made = diagnose._bound_in(diagnose._scope(tree, 11), "logits")
    assert [n.lineno for n in made] == [8]
    edit = diagnose._copied(str(path), made, 11, "logits")
    assert edit["new"] == "        logits, _ = model(X, Y)\n" and edit["start"] == 11


# Leaky integrators, one per layer of a Sequential, each keeping its own `v`: the one found
# (`net[3].v`) is not the only state the next step reads. 6db78f8 detached or reset it alone.
INTEGRATORS = """\
import torch
from torch import nn

torch.manual_seed(0)


class Integrator(nn.Module):
    def __init__(self, decay=0.8):
        super().__init__()
        self.decay = decay
        self.v = torch.zeros(1)

    def forward(self, x):
        self.v = self.decay * self.v + x
        return torch.tanh(self.v)


net = nn.Sequential(nn.Linear(20, 32), Integrator(), nn.Linear(32, 16), Integrator(0.9), nn.Linear(16, 4))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for batch in range(3):
    frames, label = torch.randn(6, 8, 20), torch.randint(0, 4, (8,))
    logits = sum(net(frame) for frame in frames)
    loss = nn.functional.cross_entropy(logits, label)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_layers_of_one_class_have_their_states_detached_or_reset_together(tmp_path):
    (tmp_path / "train.py").write_text(INTEGRATORS, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    new = outcomes(report)
    assert new.get("net[3].v, net[1].v = net[3].v.detach(), net[1].v.detach()") == "passed", new
    assert new.get("net[3].v = torch.zeros(1)\n    net[1].v = torch.zeros(1)") == "passed", new


# Each augmented view is distilled towards the clean output, a loss target: the target
# detached after the first call comes before keeping the graph at both calls (which would also
# train the clean pass from the views' losses). 6db78f8 put the graph kept first.
VIEW_CONSISTENCY = """\
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(10, 24), nn.ReLU(), nn.Linear(24, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def views(x, n=2):
    return [x + 0.1 * torch.randn_like(x) for _ in range(n)]


for step in range(3):
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    opt.zero_grad()
    clean = model(x)
    ce = F.cross_entropy(clean, y)
    ce.backward()
    for view in views(x):
        kd = F.kl_div(F.log_softmax(model(view), 1), F.softmax(clean, 1), reduction="batchmean")
        kd.backward()
    opt.step()
"""


def test_a_first_output_the_loops_losses_take_as_target_is_offered_detached_first(tmp_path):
    (tmp_path / "train.py").write_text(VIEW_CONSISTENCY, encoding="utf-8")
    _, report = diagnose_try(tmp_path, "train.py", "--try")
    first = passed(report)[0]
    assert [e["new"].strip() for e in first["edits"]] == ["clean = clean.detach()"], first


# Two passes of one step (a sharpness-aware ascent, then the descent) add their heads' losses
# to one `total` started once: the second backward goes back through the first pass too. The
# sum is started afresh before the second pass adds to it; 6db78f8 said so in words only (its
# accumulator fix looks for a function around the loop, and this loop has none).
TWO_PASS_TOTAL = """\
import torch
from torch import nn

torch.manual_seed(0)


class TwoHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.heads = nn.ModuleList(nn.Linear(16, 1) for _ in range(2))

    def forward(self, x):
        h = torch.relu(self.body(x))
        return [head(h) for head in self.heads]


model = TwoHead()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
params = list(model.parameters())
for step in range(3):
    x, ys = torch.randn(8, 8), torch.randn(2, 8, 1)
    total = 0.0
    for out, y in zip(model(x), ys):
        total += nn.functional.mse_loss(out, y)
    opt.zero_grad()
    total.backward()
    with torch.no_grad():
        eps = [0.05 * p.grad / (p.grad.norm() + 1e-12) for p in params]
        for p, e in zip(params, eps):
            p.add_(e)
    opt.zero_grad()
    for out, y in zip(model(x), ys):
        total += nn.functional.mse_loss(out, y)
    total.backward()
    with torch.no_grad():
        for p, e in zip(params, eps):
            p.sub_(e)
    opt.step()
"""


def test_a_sum_two_passes_of_one_step_add_to_is_started_afresh_between_them(tmp_path):
    (tmp_path / "train.py").write_text(TWO_PASS_TOTAL, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    first = passed(report)[0]
    assert [(e["start"], e["new"].strip()) for e in first["edits"]] == [(33, "total = 0.0")]


# A latent optimized afresh for each target (`z = z.detach().clone().requires_grad_(True)` and
# a new optimizer), a smoother's list carried across its inner steps. The try stops two calls
# past the error, just after the next target's `z` is made and before it is stepped: 6db78f8
# named the stepped tensors only then, when the old `z` had no name left, and judged every fix
# "no gradient when an optimizer stepped it". Stepped tensors keep the name they had when stepped.
PER_TARGET_LATENT = """\
import torch
from torch import nn

torch.manual_seed(0)


class Smoother:
    def __init__(self):
        self.past = []

    def __call__(self, x):
        self.past.append(x)
        return sum(self.past[-2:]) / len(self.past[-2:])


decoder = nn.Linear(4, 8).requires_grad_(False)
smoother = Smoother()
targets = torch.randn(3, 8)
z = torch.zeros(4)
for target in targets:
    z = z.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([z], lr=0.1)
    for inner in range(3):
        out = smoother(decoder(z))
        loss = (out - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_leaf_made_again_each_outer_step_keeps_the_name_it_was_stepped_under(tmp_path):
    (tmp_path / "train.py").write_text(PER_TARGET_LATENT, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    new = outcomes(report)
    assert new.get("smoother.past = [s.detach() for s in smoother.past]") == "passed", new
    assert new.get("smoother.past.clear()") == "passed", new


# A gradient projection between two tasks (PCGrad's kind): task a's gradients are taken with
# autograd.grad, then task b's backward goes through the same trunk, and only afterwards is
# task a's gradient read, to project `.grad`. No loss uses it: retain_graph=True is the fix, not
# create_graph=True, which 6db78f8 offered because the result was still held.
GRAD_PROJECTION = """\
import torch
from torch import nn

torch.manual_seed(0)

trunk = nn.Sequential(nn.Linear(10, 16), nn.ReLU())
head_a, head_b = nn.Linear(16, 1), nn.Linear(16, 1)
shared, own_a = list(trunk.parameters()), list(head_a.parameters())
opt = torch.optim.SGD([*shared, *own_a, *head_b.parameters()], lr=0.05)
for step in range(3):
    x, ya, yb = torch.randn(8, 10), torch.randn(8, 1), torch.randn(8, 1)
    h = trunk(x)
    loss_a = nn.functional.mse_loss(head_a(h), ya)
    loss_b = nn.functional.mse_loss(head_b(h), yb)
    grads_a = torch.autograd.grad(loss_a, shared + own_a)
    opt.zero_grad()
    loss_b.backward()
    for p, ga in zip(shared + own_a, grads_a):
        gb = p.grad if p.grad is not None else torch.zeros_like(p)
        dot = (ga * gb).sum()
        if dot < 0:  # project task a's gradient off task b's where they conflict
            ga = ga - dot / gb.pow(2).sum() * gb
        p.grad = ga + gb
    opt.step()
"""


def test_a_grad_result_read_only_after_the_second_call_asks_for_retain_not_create(tmp_path):
    (tmp_path / "train.py").write_text(GRAD_PROJECTION, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    assert "retain_graph=True" in report["fix"] and "create_graph" not in report["fix"]
    first = passed(report)[0]
    assert [e["new"].strip() for e in first["edits"]] == [
        "grads_a = torch.autograd.grad(loss_a, shared + own_a, retain_graph=True)"
    ]


# A temperature `__init__` computes from its parameter (`self.temp = self.log_temp.exp()`): the
# task loss and the calibration loss both go back through that one node in the first step
# (shared-forward), and every step after. Computed at each use, as a property, both train;
# 6db78f8 offered the property only for carried state and had no fix that passed.
LEARNED_TEMPERATURE = """\
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class Calibrated(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        self.log_temp = nn.Parameter(torch.zeros(()))
        self.temp = self.log_temp.exp()

    def forward(self, x):
        return self.net(x) / self.temp


model = Calibrated()
opt_net = torch.optim.SGD(model.net.parameters(), lr=0.05)
opt_temp = torch.optim.SGD([model.log_temp], lr=0.01)
for step in range(3):
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    loss = F.cross_entropy(model(x), y)
    opt_net.zero_grad()
    loss.backward()
    opt_net.step()
    xv, yv = torch.randn(16, 8), torch.randint(0, 3, (16,))
    nll = F.cross_entropy(model.net(xv).detach() / model.temp, yv)
    opt_temp.zero_grad()
    nll.backward()
    opt_temp.step()
"""


def test_a_tensor_init_computes_read_by_two_losses_of_one_step_becomes_a_property(tmp_path):
    (tmp_path / "train.py").write_text(LEARNED_TEMPERATURE, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    assert report["cause"] == "shared-forward"
    first = passed(report)[0]
    assert "def temp(self):" in "".join(e["new"] for e in first["edits"]), first


# A streaming tagger keeps its GRU state on the module (`self._h`), and each batch's loop makes
# a fresh list of per-chunk outputs, stacked for the loss. The list and the stack hold only this
# step's values (made anew in each pass, before the call); c54b2c4 named `outs` the carrier,
# offered to store detached outputs in it, and no fix passed.
STREAM_TAGGER = """\
import torch
from torch import nn

torch.manual_seed(0)


class StreamTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 8)
        self.out = nn.Linear(8, 1)
        self._h = None

    def forward(self, chunk):
        if self._h is None:
            self._h = torch.zeros(chunk.shape[0], 8)
        self._h = self.cell(chunk, self._h)
        return self.out(self._h).squeeze(-1)


def train_epoch(model, opt, batches):
    for frames, tags in batches:
        outs = []
        for t in range(frames.shape[1]):
            outs.append(model(frames[:, t]))
        stacked = torch.stack(outs, dim=1)
        loss = nn.functional.binary_cross_entropy_with_logits(stacked, tags)
        opt.zero_grad()
        loss.backward()
        opt.step()


model = StreamTagger()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
batches = [(torch.randn(3, 5, 4), torch.rand(3, 5).round()) for _ in range(4)]
for epoch in range(2):
    train_epoch(model, opt, batches)
"""


def test_what_each_pass_makes_anew_is_not_the_carrier_the_module_state_is(tmp_path):
    (tmp_path / "train.py").write_text(STREAM_TAGGER, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    assert "model._h" in report["fix"] and "outs" not in report["fix"], report["fix"]
    new = {e["new"].strip() for f in passed(report) for e in f["edits"]}
    # Detached after each step, in the batch loop (not the epoch loop), or started afresh.
    assert new == {"model._h = model._h.detach()", "model._h = None"}, new
    assert all(e["start"] == 30 for f in passed(report) for e in f["edits"])


# One recurrent encoder's state (`self.state`, an LSTM's pair) feeds two losses of one step, each with its own
# backward and optimizers: the value loss, then the policy loss after a second encoder pass.
# The second pass reads the state the first wrote, whose graph the first call freed, so no
# detach after either call alone is enough; storing it detached where the forward writes it is.
# c54b2c4 offered only the detach after the raising call, which raised again.
TWO_LOSS_RECURRENT = """\
import torch
from torch import nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(6, 12, batch_first=True)
        self.state = None

    def forward(self, obs):
        out, (h, c) = self.rnn(obs.unsqueeze(1), self.state)
        self.state = (h, c)
        return out.squeeze(1)


enc = Encoder()
value_head, policy_head = nn.Linear(12, 1), nn.Linear(12, 3)
opt_enc = torch.optim.Adam(enc.parameters(), lr=1e-3)
opt_value = torch.optim.Adam(value_head.parameters(), lr=1e-3)
opt_policy = torch.optim.Adam(policy_head.parameters(), lr=1e-3)
for step in range(3):
    obs, ret = torch.randn(5, 6), torch.randn(5, 1)
    value_loss = (value_head(enc(obs)) - ret).pow(2).mean()
    opt_enc.zero_grad()
    opt_value.zero_grad()
    value_loss.backward()
    opt_enc.step()
    opt_value.step()
    logits = policy_head(enc(obs))
    policy_loss = -logits.log_softmax(-1)[:, 0].mean()
    opt_enc.zero_grad()
    opt_policy.zero_grad()
    policy_loss.backward()
    opt_enc.step()
    opt_policy.step()
"""


def test_a_state_freed_by_the_other_loss_of_the_step_is_stored_detached(tmp_path):
    (tmp_path / "train.py").write_text(TWO_LOSS_RECURRENT, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    first = passed(report)[0]
    assert [(e["start"], e["new"].strip()) for e in first["edits"]] == [
        (15, "self.state = (h.detach(), c.detach())")
    ], first


# A Fisher penalty built once per task from the weights, by a loop of `+=` before the batch
# loop, in a function called after the Fisher pass's own backward calls: the node is dated
# after those calls, but it was built before the loop that raised. c54b2c4 read it as an RNN's
# state and told to detach it after each step, which ran and froze the penalty; it is computed
# again in each step, the `+=` loop with it.
FISHER_PENALTY = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]

fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
for x, y in data:
    model.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    for n, p in model.named_parameters():
        fisher[n] += p.grad.detach() ** 2 / len(data)
anchor = {n: p.detach().clone() for n, p in model.named_parameters()}


def train_task(batches, strength):
    penalty = 0.0
    for n, p in model.named_parameters():
        penalty += (fisher[n] * (p - anchor[n]) ** 2).sum()
    for x, y in batches:
        loss = nn.functional.cross_entropy(model(x), y) + strength * penalty
        opt.zero_grad()
        loss.backward()
        opt.step()


train_task([(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)], 10.0)
"""


def test_a_penalty_summed_before_the_batch_loop_is_computed_again_in_each_step(tmp_path):
    (tmp_path / "train.py").write_text(FISHER_PENALTY, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    assert "before the loop" in report["fix"], report["fix"]
    first = passed(report)[0]
    new = "".join(e["new"] for e in first["edits"])
    assert "penalty = 0.0" in new and "penalty += " in new, first
    assert first["edits"][0]["start"] == 23, first


# An ODE policy rolled out from a start state a module-level dict keeps: each step stores its
# final state there and the next starts from it, with the graph. The L-BFGS-style closure's
# loss is returned by `opt.step(closure)` and still bound at the error; it reaches the freed
# node, as every earlier loss does, but carries nothing: c54b2c4 named `loss` the carrier and
# its detach raised again. The dict is what carries.
ROLLOUT_STARTS = """\
import torch
from torch import nn

torch.manual_seed(0)
_starts = {}


def start_state(batch):
    if "x" not in _starts:
        _starts["x"] = torch.randn(batch, 2)
    return _starts["x"]


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))

    def rollout(self, x, steps=5):
        for _ in range(steps):
            x = x + 0.1 * self.net(x)
        return x


policy = Policy()
opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
for it in range(4):
    def closure():
        opt.zero_grad()
        end = policy.rollout(start_state(8))
        _starts["x"] = end
        loss = end.pow(2).sum(1).mean()
        loss.backward()
        return loss
    loss = opt.step(closure)
"""


def test_a_returned_loss_still_bound_is_not_the_carrier_a_dict_of_starts_is(tmp_path):
    (tmp_path / "train.py").write_text(ROLLOUT_STARTS, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    assert "_starts" in report["fix"], report["fix"]
    first = passed(report)[0]
    assert [e["new"].strip() for e in first["edits"]] == ['_starts["x"] = end.detach()'], first


# Sobolev training: a network fitted to values and to slopes, the slope taken by autograd.grad
# and negated on the same line, so the grad call's own result is no longer held at the error.
# The loss reads what the line made of it: create_graph=True, not retain_graph=True (which runs,
# and leaves the slope term with no graph to train through). c54b2c4 offered retain_graph.
SOBOLEV_SLOPES = """\
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for step in range(3):
    x = torch.rand(16, 1) * 6 - 3
    x.requires_grad_(True)
    y = net(x)
    slope = -torch.autograd.grad(y.sum(), x)[0]
    loss = (y - torch.sin(x)).pow(2).mean() + (slope + torch.cos(x)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_grad_result_the_line_negates_and_a_loss_reads_asks_for_create_graph(tmp_path):
    (tmp_path / "train.py").write_text(SOBOLEV_SLOPES, encoding="utf-8")
    report = check_passed(tmp_path, "train.py", True)
    assert "create_graph=True" in report["fix"], report["fix"]
    first = passed(report)[0]
    assert [e["new"].strip() for e in first["edits"]] == [
        "slope = -torch.autograd.grad(y.sum(), x, create_graph=True)[0]"
    ], first


def test_a_try_with_nothing_trained_before_the_error_must_train_something_itself(tmp_path):
    # grad_penalty.py's first call is autograd.grad with respect to the batch: no parameter has
    # a gradient when the backward after it raises (grad_probe, apart from the diagnoser, says
    # so), so "the same parameters" is no evidence; the try counts what its own run trained.
    shutil.copy(CASES / "grad_penalty.py", tmp_path / "grad_penalty.py")
    assert probe(tmp_path, "grad_penalty.py")["trained"] == []
    report = check_passed(tmp_path, "grad_penalty.py", True)
    first = passed(report)[0]
    (tmp_path / "fixed.py").write_text(
        applied((tmp_path / "grad_penalty.py").read_text(), first["edits"])
    )
    trained = probe(tmp_path, "fixed.py")["trained"]
    assert trained, "the fixed script trains the critic"
    assert first["tried"]["detail"] == (
        "ran 2 calls past the one that raised; no parameter had a gradient before the error to "
        f"compare with, and {len(trained)} got gradients in this run"
    )


@pytest.mark.parametrize(
    ("got", "outcome", "detail"),
    [
        (
            [],
            "no gradient",
            "ran 2 calls past the one that raised, but no parameter got a gradient",
        ),
        (
            ["D.0.weight", "D.0.bias"],
            "passed",
            "ran 2 calls past the one that raised; no parameter had a gradient before the error "
            "to compare with, and 2 got gradients in this run",
        ),
    ],
    ids=["none", "two"],
)
def test_a_run_past_an_error_nothing_trained_before_passes_only_if_it_trains(got, outcome, detail):
    # The call that raised was the fourth (stop = 4 + 2); the try ran to call 6.
    baseline = {"stop": 6, "parameters": [], "reach": [], "stepped": []}
    run = {"calls": 6, "error": None, "parameters": got, "late": got}
    tried = diagnose._verdict(run, baseline)
    assert (tried["outcome"], tried["detail"]) == (outcome, detail)
