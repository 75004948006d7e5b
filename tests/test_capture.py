"""The capture harness on small repro folders written into tmp_path."""

import json
import subprocess
import sys
import textwrap

import pytest

from backtwice import snapshot as snap
from backtwice.capture import capture
from backtwice.errors import CaptureError, InputError

from .conftest import ROOT

MESSAGE_START = "Trying to backward through the graph a second time"


def write_repro(folder, scenarios, support=None):
    """Write scenarios {id: (expect, source, timeout)} and their manifest into folder."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for ident, (expect, source, timeout) in scenarios.items():
        (folder / f"{ident}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        lines += [
            "[[scenario]]",
            f'id = "{ident}"',
            f'expect = "{expect}"',
            f"timeout = {timeout}",
            "",
        ]
    (folder / "scenarios.toml").write_text("\n".join(lines), encoding="utf-8")
    if support:
        (folder / "support.py").write_text(textwrap.dedent(support), encoding="utf-8")
    return folder


KNOWN = {
    "twice": (
        "raises",
        """\
        import torch

        x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x.exp()
        loss = (y * y).sum()
        loss.backward()
        # a comment line, so the raising line is not simply the last
        loss.backward()
        print("never printed")
        """,
        30,
    ),
    "square": (
        "runs",
        """\
        import torch

        x = torch.tensor([1.0, -2.0, 3.5], requires_grad=True)
        (x * x).sum().backward()
        print("grad:", x.grad)
        """,
        30,
    ),
    "cube": (
        "runs",
        """\
        import torch

        x = torch.tensor([0.5, 2.0], requires_grad=True)
        (x**3).sum().backward()
        print("grad:", x.grad)
        """,
        30,
    ),
    "seeded": (
        "runs",
        """\
        import torch

        print("draw:", torch.rand(3))
        """,
        30,
    ),
}


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """One capture of the KNOWN scenarios, shared by the tests that read it."""
    repro = write_repro(tmp_path_factory.mktemp("repro"), KNOWN)
    return repro, capture(repro, say=lambda _: None, today="2026-01-01")


def test_exception_is_captured_exactly_and_located(known):
    _, result = known
    raised = result.scenarios["twice"].raised
    assert raised.type == "RuntimeError"
    assert raised.message.startswith(MESSAGE_START)
    assert raised.message.endswith("after calling backward.")
    assert raised.line == 8
    assert raised.code == "loss.backward()"
    assert result.scenarios["twice"].outputs == ()


def test_anomaly_mode_names_node_and_forward_line(known):
    _, result = known
    anomaly = result.scenarios["twice"].anomaly
    assert anomaly.node == "MulBackward0"
    assert (anomaly.line, anomaly.code) == (5, "loss = (y * y).sum()")


def test_gradient_of_sum_of_squares_is_two_x(known):
    _, result = known
    (output,) = result.scenarios["square"].outputs
    x = [1.0, -2.0, 3.5]
    assert output.values[1]["tensor"] == [2 * v for v in x]
    assert output.line == 5


def test_gradient_of_sum_of_cubes_is_three_x_squared(known):
    _, result = known
    (output,) = result.scenarios["cube"].outputs
    assert output.values[1]["tensor"] == pytest.approx([3 * 0.5**2, 3 * 2.0**2])


def test_printed_text_matches_what_print_writes(known):
    _, result = known
    (output,) = result.scenarios["square"].outputs
    assert output.text == "grad: tensor([ 2., -4.,  7.])"


def test_each_scenario_starts_from_the_same_seed(known, tmp_path):
    repro, first = known
    again = capture(repro, say=lambda _: None, today="2026-01-01")
    assert snap.dumps(first) == snap.dumps(again)
    assert first.scenarios["seeded"].outputs == again.scenarios["seeded"].outputs


def test_environment_is_recorded(known):
    _, result = known
    import torch

    public, _, build = torch.__version__.partition("+")
    assert (result.environment.torch, result.environment.build) == (public, build)
    assert result.environment.python == ".".join(map(str, sys.version_info[:3]))
    assert result.environment.captured == "2026-01-01"
    assert set(result.sources) == {f"{name}.py" for name in KNOWN} | {
        "scenarios.toml",
        "backtwice/diagnose.py",
    }


# A scenario that names no optimizer runs in a fork made before the warm-up; one that names
# one, after it. Faults must be caught alike on both paths.
LATE = "# torch.optim, named: this scenario runs after the warm-up\n"
EITHER_PATH = pytest.mark.parametrize("late", ["", LATE], ids=["early", "after-warm-up"])


@EITHER_PATH
def test_hanging_scenario_times_out_by_name(tmp_path, late):
    repro = write_repro(
        tmp_path / "repro",
        {
            "fine": ("runs", "import torch\n" + late, 30),
            "hangs": ("runs", "import time\nwhile True:\n    time.sleep(0.05)\n" + late, 1),
        },
    )
    with pytest.raises(CaptureError) as caught:
        capture(repro, say=lambda _: None)
    assert str(caught.value) == (
        f"{repro / 'hangs.py'}: scenario 'hangs' did not finish within 1 s; "
        "make it finish or raise its timeout; nothing was written"
    )


@EITHER_PATH
def test_crashing_scenario_is_reported_by_name(tmp_path, late):
    source = "import os\nos._exit(7)\n" + late
    repro = write_repro(
        tmp_path / "repro", {"fine": ("runs", "x = 1\n", 30), "dies": ("runs", source, 30)}
    )
    with pytest.raises(CaptureError) as caught:
        capture(repro, say=lambda _: None)
    assert str(caught.value).startswith(
        f"{repro / 'dies.py'}: scenario 'dies' crashed the capture interpreter: it exited with code 7"
    )


@pytest.mark.fresh  # the capture interpreter itself killed: a real one
def test_a_killed_server_names_every_scenario_under_way(tmp_path):
    # 'slow' is still running, and so the one awaited, when 'killer' kills the server: both are
    # named, not the awaited one alone, since either may have done it.
    slow = "import time\ntime.sleep(1.5)\n" + LATE
    killer = "import os\nimport signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + LATE
    repro = write_repro(
        tmp_path / "repro", {"slow": ("runs", slow, 30), "killer": ("runs", killer, 30)}
    )
    with pytest.raises(CaptureError) as caught:
        capture(repro, say=lambda _: None)
    assert str(caught.value) == (
        f"{repro / 'slow.py'}: the capture interpreter was killed by signal 9 while scenarios "
        "'slow' and 'killer' were under way; one of them caused it; nothing was written"
    )


@EITHER_PATH
def test_segfault_is_reported_by_name(tmp_path, late):
    source = "import ctypes\nctypes.string_at(0)\n" + late
    repro = write_repro(tmp_path / "repro", {"segv": ("runs", source, 30)})
    with pytest.raises(CaptureError, match=r"scenario 'segv' crashed .* killed by signal 11"):
        capture(repro, say=lambda _: None)


def test_declared_to_run_but_raises_shows_scenario_frames_only(tmp_path):
    source = "import torch\n\ndef helper():\n    raise ValueError('boom')\n\nhelper()\n"
    repro = write_repro(tmp_path / "repro", {"oops": ("runs", source, 30)})
    with pytest.raises(CaptureError) as caught:
        capture(repro, say=lambda _: None)
    text = str(caught.value)
    assert text.startswith(
        f"{repro / 'oops.py'}(4): is declared to run but raised ValueError: boom"
    )
    assert 'oops.py", line 6, in <module>' in text
    assert 'oops.py", line 4, in helper' in text
    assert "harness.py" not in text
    assert text.endswith('Fix the scenario, or set expect = "raises" in repro/scenarios.toml')


def test_declared_to_raise_but_runs(tmp_path):
    repro = write_repro(tmp_path / "repro", {"calm": ("raises", "x = 1\n", 30)})
    with pytest.raises(CaptureError) as caught:
        capture(repro, say=lambda _: None)
    assert str(caught.value) == (
        f"{repro / 'calm.py'}: is declared to raise but ran to the end; fix the scenario, "
        'or set expect = "runs" in repro/scenarios.toml'
    )


def test_manifest_naming_a_missing_file(tmp_path):
    repro = write_repro(tmp_path / "repro", {"here": ("runs", "x = 1\n", 30)})
    (repro / "here.py").unlink()
    with pytest.raises(
        InputError, match=r"field 'id' names .*here.py, which does not exist; add the file"
    ):
        capture(repro, say=lambda _: None)


def test_capture_output_round_trips_through_json(known):
    _, result = known
    text = snap.dumps(result)
    assert snap.parse(text, "x") == result
    assert json.loads(text)["schema"] == snap.SCHEMA
    assert text.endswith("}\n")


def memory_hooks():
    """The pack and unpack functions of repro/memory.py, defined on their own."""
    import ast

    from .conftest import REPRO

    tree = ast.parse((REPRO / "memory.py").read_text(encoding="utf-8"))
    measure = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "measure")
    hooks = [n for n in measure.body if isinstance(n, ast.FunctionDef)]
    assert [n.name for n in hooks] == ["pack", "unpack"]
    import torch

    namespace = {"torch": torch, "weakref": __import__("weakref"), "saved": []}
    exec(compile(ast.Module(hooks, []), "memory.py", "exec"), namespace)
    return namespace["pack"], namespace["unpack"]


def sigmoid_then_modified(hooks):
    """Run a graph whose saved tensor is changed in place; return the error text or x.grad."""
    import torch

    x = torch.tensor([0.5, -1.0], requires_grad=True)
    if hooks is None:
        y = x.sigmoid() * 2
    else:
        with torch.autograd.graph.saved_tensors_hooks(*hooks):
            y = x.sigmoid() * 2
    y.sum().backward(retain_graph=True)
    first = x.grad.tolist()
    try:
        if hooks is None:
            s = x.sigmoid()
            z = s * s
        else:
            with torch.autograd.graph.saved_tensors_hooks(*hooks):
                s = x.sigmoid()
                z = s * s
        s.mul_(2)
        z.sum().backward()
    except RuntimeError as exc:
        return first, "raises", "inplace operation" in str(exc)
    return first, "runs", x.grad.tolist()


def test_memory_hooks_keep_torchs_inplace_check():
    """Measuring never changes the outcome: the hooks raise where plain torch raises."""
    import torch

    hooks = memory_hooks()
    plain = sigmoid_then_modified(None)
    assert plain[1:] == ("raises", True)
    assert sigmoid_then_modified(hooks) == plain

    def pass_through(tensor):
        return tensor

    # Without the version check, a pass-through hook pair lets the same graph run silently.
    assert sigmoid_then_modified((pass_through, pass_through))[1] == "runs"
    assert torch.is_grad_enabled()


MEDDLES = """\
import os
import torch

print("starts in its own folder:", os.getcwd() == os.path.dirname(os.path.abspath(__file__)))
print("environment:", os.environ.get("BACKTWICE_MEDDLED"), os.environ.get("GLIBC_TUNABLES"))
print("default dtype:", torch.get_default_dtype(), torch.ones(1).dtype)
print("sum:", (torch.arange(4) / 3).sum())
with open(f"/proc/{{os.getppid()}}/status") as status:  # forked from one thread: no pool to break
    print("threads where it was forked from:", status.read().split("Threads:")[1].split()[0])
os.environ["BACKTWICE_MEDDLED"] = "{ident}"
os.chdir("/")
torch.set_default_dtype(torch.float64)
"""


def test_scenarios_start_clean_whatever_ran_before_and_wherever_the_build_runs(
    tmp_path, monkeypatch
):
    # Each scenario changes the environment, the working folder and torch's default dtype;
    # none of it reaches the next one, in either order, nor does the caller's folder.
    monkeypatch.delenv("BACKTWICE_MEDDLED", raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    snapshots = []
    for order in (("first", "second"), ("second", "first")):
        folder = tmp_path / "-".join(order)
        folder.mkdir()
        monkeypatch.chdir(folder)  # the caller's folder differs each time too
        repro = write_repro(
            folder / "repro",
            {ident: ("runs", MEDDLES.format(ident=ident), 30) for ident in order},
        )
        captured = capture(repro, say=lambda _: None, today="2026-01-01")
        snapshots.append({k: snap.to_data(v) for k, v in captured.scenarios.items()})
    assert snapshots[0] == snapshots[1]
    assert [o["text"] for o in snapshots[0]["first"]["outputs"]] == [
        "starts in its own folder: True",
        "environment: None None",  # the harness's own malloc setting is not the scenario's
        "default dtype: torch.float32 torch.float32",
        "sum: tensor(2.)",
        "threads where it was forked from: 1",
    ]


RAISES_TWICE = """\
import sys
import torch

torch.manual_seed(1)
w = torch.randn(3, requires_grad=True)
loss = (w.exp() * 2).sum()
loss.backward()
print("grad", w.grad)
loss.backward()
"""


def test_a_job_records_the_same_before_and_after_the_warm_up(tmp_path):
    # The same scenario, once early (it names no optimizer) and once after the warm-up (a
    # comment names one): its printed lines, error, anomaly node and diagnosis are the same.
    runs = []
    for name, source in (("early", RAISES_TWICE), ("late", RAISES_TWICE + LATE)):
        repro = write_repro(tmp_path / name, {"twice": ("raises", source, 30)})
        captured = capture(repro, say=lambda _: None, today="2026-01-01")
        runs.append(snap.to_data(captured.scenarios["twice"]))
    for run in runs:  # a fix's diff shows the line after the call it removes: LATE's comment
        text = run["diagnosis"]["text"]
        run["diagnosis"]["text"] = text[: text.index("\nfix 1 (")]
    assert runs[0] == runs[1]
    assert runs[0]["raised"]["message"].startswith(MESSAGE_START)
    assert runs[0]["anomaly"]["node"].endswith("Backward0")
    assert runs[0]["diagnosis"]["text"]


@pytest.mark.fresh  # what a fresh interpreter has imported before the warm-up
def test_a_job_that_steps_no_optimizer_runs_before_the_warm_up(tmp_path):
    # It starts as a fresh interpreter would, without torch._dynamo, which the warm-up's
    # optimizer step imports; a job that names an optimizer starts after it.
    source = "import sys\nprint('dynamo imported:', 'torch._dynamo' in sys.modules)\n"
    repro = write_repro(
        tmp_path / "repro",
        {"early": ("runs", source, 30), "late": ("runs", source + LATE, 30)},
    )
    captured = capture(repro, say=lambda _: None, today="2026-01-01")
    printed = {k: [o.text for o in v.outputs] for k, v in captured.scenarios.items()}
    assert printed == {"early": ["dynamo imported: False"], "late": ["dynamo imported: True"]}


def test_seeding_without_an_accelerator_gives_torch_manual_seeds_numbers(monkeypatch):
    """The harness seeds only the CPU generator where no accelerator is there: the numbers a
    job draws are the ones torch.manual_seed(SEED) gives."""
    import random

    import torch

    from backtwice import harness

    expected = []
    for cpu_only in ([], [True]):
        monkeypatch.setattr(harness, "_CPU_ONLY", cpu_only)
        torch.manual_seed(12345)  # something else first, so that seeding has to reset it
        random.seed(12345)
        harness.seed()
        drawn = (torch.rand(4).tolist(), torch.randn(2, 2).tolist(), random.random())
        expected.append(drawn)
    torch.manual_seed(harness.SEED)
    random.seed(harness.SEED)
    plain = (torch.rand(4).tolist(), torch.randn(2, 2).tolist(), random.random())
    assert expected == [plain, plain]
    assert harness.no_accelerator() == (not torch.cuda.is_available())


PROBED = """\
import os

import torch

asked = torch.cuda.is_available


def is_available():  # notes which process asked; torch's own answer
    with open(os.environ["BACKTWICE_TEST_ASKED"], "a") as handle:
        handle.write(f"{os.getpid()}\\n")
    return asked()


torch.cuda.is_available = is_available
"""


def test_the_server_never_asks_torch_for_a_device(tmp_path, monkeypatch):
    # Asking initializes the device's driver, and no fork of a process that has done so can
    # use the device: on a GPU machine every job would fail. A fork asks, and the server not.
    asked = tmp_path / "asked"
    monkeypatch.setenv("BACKTWICE_TEST_ASKED", str(asked))
    source = "import os\nimport support\nprint('server', os.getppid())\n" + LATE
    repro = write_repro(tmp_path / "repro", {"late": ("runs", source, 30)}, support=PROBED)
    captured = capture(repro, say=lambda _: None, today="2026-01-01")
    (printed,) = [o.text for o in captured.scenarios["late"].outputs]
    server = int(printed.split()[1])
    callers = {int(pid) for pid in asked.read_text().split()}
    assert callers, "nothing asked torch.cuda.is_available(): the test saw nothing"
    assert server not in callers
    assert captured.environment.device == "cpu"


NUMERICS = """\
import torch

model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 8))
rnn = torch.nn.RNN(8, 32, batch_first=True)
opt = torch.optim.SGD([*model.parameters(), *rnn.parameters()], lr=0.1)
for step in range(3):
    x = torch.randn(16, 10, 64)
    out, h = rnn(model(x))
    loss = out.pow(2).mean() + h.exp().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
for name, p in [*model.named_parameters(), *rnn.named_parameters()]:
    print(name, repr(p.grad.norm().item()), repr(p.detach().sum().item()))
"""


def test_any_x86_machine_captures_the_same_numbers(tmp_path, monkeypatch):
    # As if on a machine whose widest vector unit is AVX2, then on this one (AVX-512 on these
    # machines). Without the harness's pinned kernels the two differ in the last digits here
    # (torch's kernels, MKL's products and oneDNN's RNN each pick their own), and a snapshot
    # captured on one machine fails `--check` on another.
    printed = []
    for limits in (
        {
            "ATEN_CPU_CAPABILITY": "avx2",
            "ONEDNN_MAX_CPU_ISA": "AVX2",
            "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        },
        {},
    ):
        for name in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"):
            monkeypatch.delenv(name, raising=False)
        for name, value in limits.items():
            monkeypatch.setenv(name, value)
        repro = write_repro(tmp_path / str(len(printed)), {"kernels": ("runs", NUMERICS, 60)})
        captured = capture(repro, say=lambda _: None, today="2026-01-01")
        printed.append([o.text for o in captured.scenarios["kernels"].outputs])
    assert len(printed[0]) == 8
    assert printed[0] == printed[1]


SERVED_WITH_IDLE_WORK = """\
import json, os, sys, time
from backtwice import harness

events = []


def idle():
    for step in range(6):
        events.append(["idle", step])
        time.sleep(0.05)
        yield True


jobs = [
    {"id": f"j{n}", "file": os.path.join(sys.argv[1], f"j{n}.py"), "source": "import time\\ntime.sleep(0.2)\\n"}
    for n in range(3)
]
_, channel = os.pipe()
harness.serve(jobs, sys.argv[1], lambda m: events.append([m["event"], m["id"]]), channel, 1, None, idle())
print(json.dumps(events))
"""


def test_the_servers_idle_work_is_done_while_jobs_run(tmp_path):
    # The server collapses its memory a huge page at a time where it would otherwise wait for
    # a job: every step is done, jobs run meanwhile, and each is still reported in order.
    result = subprocess.run(
        [sys.executable, "-c", SERVED_WITH_IDLE_WORK, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    events = [tuple(event) for event in json.loads(result.stdout.splitlines()[-1])]
    jobs = [event for event in events if event[0] != "idle"]
    assert jobs == [(event, f"j{n}") for n in range(3) for event in ("start", "done")]
    assert [event for event in events if event[0] == "idle"] == [("idle", n) for n in range(6)]
    first = events[events.index(("start", "j0")) + 1 : events.index(("done", "j0"))]
    assert ("idle", 0) in first, "the idle work waited for the first job to end"
