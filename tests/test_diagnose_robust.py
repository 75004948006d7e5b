"""The diagnoser on unusual scripts and bad input behaves as `python SCRIPT` does (issue 17).

Each test writes a small script to tmp_path, runs it plainly (`python script.py`) and under the
diagnoser (`python -m backtwice.diagnose [--json F] script.py`, cwd = tmp_path), and compares
what the reader sees: stdout, the exit status, and the script's own stderr (the traceback), which
is the diagnosed run's stderr with its one report taken out. The report's text is
`diagnose.format_report(json_report)`, so the comparison holds whatever the report looks like.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from backtwice import diagnose

from . import warm
from .conftest import ROOT

BACKWARD_TWICE = "Trying to backward through the graph a second time"
ADDED_AGAIN = "added again"
# The report's last line when it has a machine fix: the command that tries them.
OFFER = r"(?m)^backtwice\.diagnose: to try each fix on .* --try .*\n"
TIMEOUT = 300


def environment():
    """The test's environment, with this checkout's backtwice importable from any folder."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("NO_COLOR", None)
    # A reader's Python buffers what goes to a pipe: a diagnoser that lost that buffer on its
    # way out would pass under a caller's PYTHONUNBUFFERED=1.
    env.pop("PYTHONUNBUFFERED", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(args, cwd):
    """Run `python ARGS` (args[0] is sys.executable) in cwd; stdout and stderr as text. In a
    fork of the warm interpreter (tests/warm.py), a new one in a test marked `fresh`: the plain
    and the diagnosed run of a test both ways alike."""
    assert args[0] == sys.executable, args
    return warm.run(args[1:], cwd, environment(), TIMEOUT)


def plain(cwd, *args):
    return run([sys.executable, *args], cwd)


def under(cwd, *args):
    return run([sys.executable, "-m", "backtwice.diagnose", *args], cwd)


def write(folder, name, source):
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def line_of_text(path, text):
    """The number of the one line of path whose code is `text`."""
    found = [
        number
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if line.strip() == text
    ]
    assert len(found) == 1, (path, text, found)
    return found[0]


def line_of(path, marker):
    """The number of the one line of path that ends with the comment `# marker`."""
    found = [
        number
        for number, text in enumerate(path.read_text().splitlines(), start=1)
        if text.rstrip().endswith("# " + marker)
    ]
    assert len(found) == 1, (path, marker, found)
    return found[0]


def report_text(report):
    """The text the diagnoser prints for a JSON report, or None when there is nothing to print."""
    if report is None or report.get("error") is None:
        return None
    return diagnose.format_report(report)


def own_stderr(stderr, report, reports=1):
    """stderr with the report taken out once; `reports` is how often it must appear there
    (None: at most once)."""
    text = report_text(report)
    if text is None:
        assert reports in (0, None), "no report was written: " + stderr
        return stderr
    count = stderr.count(text)
    if reports is None:
        assert count <= 1, stderr
    else:
        assert count == reports, f"the report appears {count} times, not {reports}:\n{stderr}"
    return re.sub(OFFER, "", stderr.replace(text + "\n", "", 1), count=1)


def load(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def assert_same(first, second, what):
    assert second.returncode == first.returncode, (what, first.stderr, second.stderr)
    assert second.stdout == first.stdout, what


def report_path(tmp_path):
    """A path for the diagnosed run's --json report, outside the script's folder."""
    return Path(tempfile.mkdtemp(prefix="report-", dir=tmp_path.parent)) / "report.json"


def compare(tmp_path, args, reports=1, first=None, need_json=True):
    """Run `python ARGS` (unless `first` is that run) and `python -m backtwice.diagnose --json R
    ARGS` in tmp_path; assert the reader sees the same; return (plain, diagnosed, report)."""
    out = report_path(tmp_path)
    first = first or plain(tmp_path, *args)
    second = under(tmp_path, "--json", str(out), *args)
    return checked(first, second, out, reports, need_json, args)


def checked(first, second, out, reports=1, need_json=True, args=()):
    """Assert the diagnosed run (its report in `out`) shows the reader what the plain run
    showed; return (plain, diagnosed, report)."""
    assert out.exists() or not need_json, second.stderr
    report = load(out) if out.exists() else None
    assert_same(first, second, args)
    if report and (BACKWARD_TWICE in (report.get("error") or "") or report.get("cause")):
        assert reports != 0, second.stderr
    assert own_stderr(second.stderr, report, reports) == first.stderr
    return first, second, report


# ---- a script that uses `with diagnose():` itself ---------------------------------------------

WITH_DIAGNOSE = """
    import torch
    from torch import nn

    from {module} import diagnose

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    total = 0.0
    with diagnose(json_path="inner.json"):
        for step in range(3):
            x, y = torch.randn(8, 6), torch.randn(8, 1)
            loss = nn.functional.mse_loss(model(x), y)  # forward
            total = total + loss
            opt.zero_grad()
            total.backward()  # raises
            opt.step()
            print("step", step, round(total.item(), 6))
"""


def check_with_diagnose(tmp_path, script, second, command="python -m backtwice.diagnose"):
    """One report, the right one, and the same script output as the plain run's; the offer
    to try the fixes names the diagnoser by `command`, as the run was started.

    Under the runner the script's `diagnose(json_path="inner.json")` writes inner.json and the
    runner writes outer.json; the one report printed may be either's text (they name the
    script differently), but there is exactly one, and both files hold the right report."""
    reports = [load(tmp_path / "outer.json"), load(tmp_path / "inner.json")]
    first = plain(tmp_path, script.name)
    inner_plain = load(tmp_path / "inner.json")
    assert_same(first, second, script.name)
    assert ADDED_AGAIN not in first.stderr
    assert ADDED_AGAIN not in second.stderr, second.stderr
    for report in [*reports, inner_plain]:
        assert report["cause"] == "carried-state", (report, second.stderr)
        assert report["raised"]["line"] == line_of(script, "raises")
        assert report["node"]["line"] == line_of(script, "forward")
        assert report["double_traversals"] == []
    texts = {report_text(report) for report in reports}
    printed = [text for text in texts if text in second.stderr]
    assert len(printed) == 1 and second.stderr.count(printed[0]) == 1, second.stderr
    rest = second.stderr.replace(printed[0] + "\n", "", 1)
    # and the runner, which can run the script again, offers --try for its machine fixes
    offer = (
        f"{diagnose.PREFIX}to try each fix on {script.name} (it runs again, the edits in"
        f" memory): {command} --try {script.name}\n"
    )
    machine = any(f["applicability"] == "machine" for f in reports[0]["fixes"])
    assert rest.count(offer) == machine, rest
    rest = rest.replace(offer, "", 1)
    # the plain run prints its in-script report once; the diagnosed run prints one report
    assert rest == own_stderr(first.stderr, inner_plain)
    assert diagnose.PREFIX not in rest


def test_with_diagnose_under_the_module_gives_one_report(tmp_path):
    script = write(tmp_path, "train.py", WITH_DIAGNOSE.format(module="backtwice.diagnose"))
    second = under(tmp_path, "--json", "outer.json", script.name)
    check_with_diagnose(tmp_path, script, second)


def test_with_diagnose_under_a_copied_diagnoser_gives_one_report(tmp_path):
    # The reader copies diagnose.py next to train.py, which imports it: the runner is
    # `__main__` and the script's import loads the same file a second time as `diagnose`.
    shutil.copy(diagnose.__file__, tmp_path / "diagnose.py")
    script = write(tmp_path, "train.py", WITH_DIAGNOSE.format(module="diagnose"))
    second = run([sys.executable, "diagnose.py", "--json", "outer.json", script.name], tmp_path)
    check_with_diagnose(tmp_path, script, second, command="python diagnose.py")


def test_with_diagnose_run_plainly_prints_the_report_once(tmp_path):
    script = write(tmp_path, "train.py", WITH_DIAGNOSE.format(module="backtwice.diagnose"))
    first = plain(tmp_path, script.name)
    report = load(tmp_path / "inner.json")
    assert first.returncode == 1
    assert report["cause"] == "carried-state"
    rest = own_stderr(first.stderr, report, reports=1)
    assert rest.startswith("Traceback (most recent call last):")
    assert rest.rstrip().splitlines()[-1].startswith("RuntimeError: " + BACKWARD_TWICE)
    assert ADDED_AGAIN not in first.stderr


# ---- torch features that must run as they do plainly --------------------------------------------


RNN_RETAIN = """
    import sys

    import torch
    from torch import nn

    torch.manual_seed(0)
    rnn = nn.GRU(6, 24, batch_first=True)  # saves hundreds of tensors in one call a step
    head = nn.Linear(24, 1)
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-2)
    h = torch.zeros(1, 4, 24)
    for step in range(4):
        x, y = torch.randn(4, 30, 6), torch.randn(4, 1)
        out, h = rnn(x, h)
        loss = nn.functional.mse_loss(head(out[:, -1]), y)
        opt.zero_grad()
        loss.backward(retain_graph=True)
        print(step, repr(loss.item()), [repr(p.grad.norm().item()) for p in rnn.parameters()])
        opt.step()
    """


def test_rnn_over_a_sequence_keeps_torchs_own_inplace_error(tmp_path):
    # The GRU's call saves most of its tensors without the diagnoser's hooks (a burst), so
    # torch itself finds the weight opt.step() changed: the same error, text and gradients.
    script = write(tmp_path, "train.py", RNN_RETAIN)
    first, _, report = compare(tmp_path, [script.name])
    assert "modified by an inplace operation" in first.stderr
    assert first.stdout.count("\n") == 1  # step 0 ran; step 1 raised
    assert report["cause"] == "inplace-after-retain"
    assert report["node"]["line"] == line_of_text(script, "out, h = rnn(x, h)")
    assert [e["kind"] for e in report["lines"]] == ["forward", "kept", "raises", "changed"]


def test_an_optimizer_that_fails_to_build_keeps_its_own_traceback(tmp_path):
    # The diagnoser notes every optimizer made (to know which train a pass) through
    # Optimizer.__init__; its frame must not show, caught or not.
    script = write(
        tmp_path,
        "train.py",
        """
        import traceback

        import torch
        from torch import nn

        model = nn.Linear(3, 1)
        try:
            torch.optim.SGD([p for p in model.parameters() if p.ndim > 2], lr=0.1)
        except ValueError:
            print(traceback.format_exc())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.optim.Adam([], lr=0.1)
        """,
    )
    first, second, _ = compare(tmp_path, [script.name], reports=0)
    assert "empty parameter list" in first.stdout and "empty parameter list" in first.stderr
    assert "diagnose" not in second.stdout + second.stderr


def test_readers_profiler_is_left_as_it_was(tmp_path):
    # A burst switches the hooks off through sys.setprofile; a profiler of the reader's own
    # (cProfile, or this one) must see that nothing of it is taken, so no burst happens.
    script = write(
        tmp_path,
        "train.py",
        """
        import sys

        import torch
        from torch import nn

        calls = []

        def profiler(frame, event, arg):
            if event == "c_call" and getattr(arg, "__name__", "") == "gru":
                calls.append(frame.f_code.co_name)

        torch.manual_seed(0)
        rnn = nn.GRU(3, 8)
        sys.setprofile(profiler)
        out, h = rnn(torch.randn(12, 2, 3))
        out.sum().backward()
        still = sys.getprofile() is profiler
        sys.setprofile(None)
        print(still, calls, repr(rnn.weight_hh_l0.grad.sum().item()))
        """,
    )
    first, _, _ = compare(tmp_path, [script.name], reports=0)
    assert first.stdout.startswith("True ['forward'] ")


def test_disable_saved_tensors_hooks_runs_under_the_diagnoser(tmp_path):
    script = write(
        tmp_path,
        "train.py",
        """
        import torch
        from torch import nn

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        message = "this checkpointing scheme does not support saved tensor hooks"
        with torch.autograd.graph.disable_saved_tensors_hooks(message):
            for step in range(3):
                x, y = torch.randn(8, 5), torch.randn(8, 1)
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                print(step, repr(loss.item()))
        """,
    )
    first, second, report = compare(tmp_path, [script.name], reports=0)
    assert first.returncode == 0 and first.stdout.count("\n") == 3
    assert report["error"] is None


def test_inplace_message_with_float64_default_is_torchs(tmp_path):
    script = write(
        tmp_path,
        "train.py",
        """
        import torch
        from torch import nn

        torch.set_default_dtype(torch.float64)
        torch.manual_seed(0)
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(4, 3)
        for attempt in range(2):
            scores = torch.sigmoid(model(x))
            scores.mul_(2)
            opt.zero_grad()
            try:
                scores.sum().backward()
            except RuntimeError as exc:
                print(exc)
        hidden = model(x).exp()
        hidden.add_(1)
        hidden.sum().backward()
        """,
    )
    first, second, report = compare(tmp_path, [script.name], reports=None)
    assert first.stdout.count("torch.DoubleTensor") == 2
    assert "modified by an inplace operation" in first.stderr


# torch.compile's first use in a process either way: the warm interpreter (tests/warm.py) never
# compiles. Inductor's cache variable is read as torch starts: a new process.
@pytest.mark.parametrize(
    "backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.fresh)]
)
def test_torch_compile_has_no_false_double_traversal(tmp_path, monkeypatch, backend):
    import torch

    if not hasattr(torch, "compile"):
        pytest.skip("this torch has no torch.compile")
    if backend == "inductor":
        if shutil.which("g++") is None:
            pytest.skip("inductor compiles C++ on the CPU: no g++ here")
        # An empty cache folder, as a reader's first run has: the diagnosed run, which runs
        # first, compiles inductor's C++ afresh (about 20 s here); the plain run after it loads
        # the kernels it compiled, which give the same numbers.
        cache = tempfile.mkdtemp(prefix="inductor-", dir=tmp_path.parent)
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", cache)
    script = write(
        tmp_path,
        "train.py",
        """
        import torch
        from torch import nn

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        compiled = torch.compile(model, backend="BACKEND")
        for step in range(3):
            x, y = torch.randn(4, 8), torch.randn(4, 1)
            loss = nn.functional.mse_loss(compiled(x), y)
            opt.zero_grad()
            loss.backward()
            print(step, repr(loss.item()), [repr(p.grad.sum().item()) for p in model.parameters()])
            opt.step()
        """,
    )
    script.write_text(script.read_text().replace("BACKEND", backend))
    out = report_path(tmp_path)
    second = under(tmp_path, "--json", str(out), script.name)  # the first to compile it
    first = plain(tmp_path, script.name)
    if first.returncode != 0:
        pytest.skip("torch.compile does not run here: " + first.stderr.strip().splitlines()[-1])
    _, second, report = checked(first, second, out, reports=0, args=[script.name])
    assert ADDED_AGAIN not in second.stderr
    assert report["double_traversals"] == []
    assert second.stderr == first.stderr


# ---- --json checked before the script runs ----------------------------------------------------

FULL_DISK = """
    import sys

    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(8, 4)).pow(2).mean()
    print("loss", round(loss.item(), 4))
    loss.backward()
    opt.step()
    if sys.argv[1:] == ["again"]:
        loss.backward()
    sys.exit(3)
"""


def test_json_to_a_device_through_a_link_is_refused_before_the_run(tmp_path):
    # /dev/full opens and fails every write with ENOSPC; a character device other than a
    # terminal (or /dev/null) is no place for a report (issue 28): refused in one line before
    # the script runs, exit 2, the link left as it was.
    full = Path("/dev/full")
    if not full.is_char_device():
        pytest.skip("no /dev/full here (Linux has one)")
    script = write(tmp_path, "train.py", FULL_DISK)
    target = tmp_path / "reports" / "report.json"
    target.parent.mkdir()
    target.symlink_to(full)
    second = under(tmp_path, "--json", str(target), script.name, "again")
    assert (second.returncode, second.stdout) == (2, "")
    assert second.stderr == (
        f"--json {target}: is a device, not a file, a pipe or a terminal; give a file name;"
        " nothing was run\n"
    )
    assert os.listdir(target.parent) == ["report.json"] and target.is_symlink()
    assert full.is_char_device()


def test_json_file_that_fails_midway_is_removed(tmp_path):
    # A file limit (RLIMIT_FSIZE) fails the report's write as a full disk does, after its temp
    # file was made: that file is removed, the target never appears, the script's status stands.
    resource = pytest.importorskip("resource")
    script = write(tmp_path, "train.py", FULL_DISK)
    first, diagnosed, _ = compare(tmp_path, [script.name, "again"])
    target = tmp_path / "reports" / "report.json"
    target.parent.mkdir()
    second = subprocess.run(
        [sys.executable, "-m", "backtwice.diagnose", "--json", str(target), script.name, "again"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=environment(),
        timeout=TIMEOUT,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)),
    )
    assert_same(first, second, "--json over a file limit")
    failed = f"{diagnose.PREFIX}--json {target}: File too large; the report was not written\n"
    assert second.stderr.count(failed) == 1, second.stderr
    assert second.stderr.replace(failed, "") == diagnosed.stderr
    assert os.listdir(target.parent) == []


MARKER_SCRIPT = """
    from pathlib import Path

    Path("ran.txt").write_text("the script ran")
    print("the script ran")
"""


def unwritable_folder(tmp_path):
    """A folder no file can be created in, for this user (root ignores permission bits)."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    if not os.access(folder, os.W_OK):
        return folder
    try:  # root: sysfs refuses new files even to root
        handle, name = tempfile.mkstemp(dir="/sys")
    except OSError:
        return Path("/sys")
    os.close(handle)
    os.unlink(name)
    pytest.skip("no folder here refuses new files to this user")


@pytest.mark.parametrize("where", ["missing-folder", "directory", "unwritable"])
def test_bad_json_path_fails_before_the_script_runs(tmp_path, where):
    work = tmp_path / "work"
    work.mkdir()
    script = write(work, "train.py", MARKER_SCRIPT)
    if where == "missing-folder":
        target = tmp_path / "no" / "such" / "folder" / "report.json"
    elif where == "directory":
        target = tmp_path / "reports"
        target.mkdir()
    else:
        target = unwritable_folder(tmp_path) / "report.json"
    folder = target if where == "directory" else target.parent
    before = sorted(os.listdir(folder)) if folder.is_dir() else None
    process = under(work, "--json", str(target), script.name)
    try:
        assert process.returncode != 0
        assert not (work / "ran.txt").exists(), "the script ran before --json was checked"
        assert process.stdout == ""
        lines = process.stderr.splitlines()
        assert len(lines) == 1, process.stderr
        assert str(target) in lines[0] and "Traceback" not in process.stderr
        assert (sorted(os.listdir(folder)) if folder.is_dir() else None) == before
        assert not (tmp_path / "no").exists()
    finally:
        if where == "unwritable" and folder != Path("/sys"):
            folder.chmod(0o755)


def test_relative_json_lands_beside_the_starting_folder(tmp_path):
    (tmp_path / "runs").mkdir()
    script = write(
        tmp_path,
        "train.py",
        """
        import os

        import torch
        from torch import nn

        os.chdir("runs")
        torch.manual_seed(0)
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(torch.randn(4, 3)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(os.getcwd().endswith("runs"))
        """,
    )
    process = under(tmp_path, "--json", "report.json", script.name)
    assert process.returncode == 0, process.stderr
    assert process.stdout == "True\n"
    assert (tmp_path / "report.json").exists()
    assert not (tmp_path / "runs" / "report.json").exists()
    assert load(tmp_path / "report.json")["error"] is None


# ---- the script's own output, tracebacks and threads -------------------------------------------


def test_format_exc_shows_no_diagnoser_frames_and_stdout_no_report(tmp_path):
    script = write(
        tmp_path,
        "train.py",
        """
        import traceback

        import torch
        from torch import nn

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = model(torch.randn(5, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        try:
            loss.backward()
        except RuntimeError:
            print(traceback.format_exc())
        opt.step()
        print("carried on")
        """,
    )
    first, second, report = compare(tmp_path, [script.name], reports=None)
    assert "backtwice" not in second.stdout and "diagnose.py" not in second.stdout
    assert diagnose.PREFIX not in second.stdout
    assert first.stdout.count('File "') >= 2
    assert report["cause"] == "same-loss-twice"


def test_error_in_a_worker_thread_is_diagnosed_once(tmp_path):
    script = write(
        tmp_path,
        "train.py",
        """
        import threading

        import torch
        from torch import nn


        def train():
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            loss = model(torch.randn(5, 4)).pow(2).mean()  # forward
            opt.zero_grad()
            loss.backward()  # frees
            print("first backward done")
            loss.backward()  # raises
            opt.step()


        worker = threading.Thread(target=train)
        worker.start()
        worker.join()
        print("main thread done")
        """,
    )
    first, second, report = compare(tmp_path, [script.name], reports=1)
    assert first.returncode == 0 and "Exception in thread" in first.stderr
    assert report["cause"] == "same-loss-twice", second.stderr
    assert report["raised"]["line"] == line_of(script, "raises")
    assert report["freed_by"]["line"] == line_of(script, "frees")
    assert report["node"]["line"] == line_of(script, "forward")


ARGV_SCRIPT = """
    import sys

    print(sys.argv)
    print(__name__, __file__)
    print(sys.path[0])
"""


@pytest.mark.parametrize("given", ["train.py", "./train.py", "sub/../train.py"])
def test_argv_file_and_path_are_what_python_gives(tmp_path, given):
    write(tmp_path, "train.py", ARGV_SCRIPT)
    (tmp_path / "sub").mkdir()
    compare(tmp_path, [given, "--lr", "0.1"], reports=0)


def test_syntax_error_shows_no_runner_frames(tmp_path):
    write(
        tmp_path,
        "train.py",
        """
        import torch

        model = torch.nn.Linear(2, 1
        print(model)
        """,
    )
    first, second, _ = compare(tmp_path, ["train.py"], reports=0, need_json=False)
    assert "SyntaxError" in first.stderr
    assert second.stderr == first.stderr


def test_keyboard_interrupt_shows_no_runner_frames(tmp_path):
    write(
        tmp_path,
        "train.py",
        """
        import torch
        from torch import nn


        def train(model, opt):
            for step in range(3):
                loss = model(torch.randn(4, 3)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                print("step", step)
                if step == 1:
                    raise KeyboardInterrupt  # as if Ctrl-C arrived here


        torch.manual_seed(0)
        model = nn.Linear(3, 1)
        train(model, torch.optim.SGD(model.parameters(), lr=0.1))
        """,
    )
    first, second, _ = compare(tmp_path, ["train.py"], reports=0)
    assert first.stderr.rstrip().endswith("KeyboardInterrupt")
    assert second.stderr == first.stderr


# ---- the command line --------------------------------------------------------------------------

ARGS_SCRIPT = """
    import sys

    print(sys.argv[1:])
    sys.exit(len(sys.argv) - 1)
"""


def test_json_equals_and_double_dash_are_accepted(tmp_path):
    write(tmp_path, "train.py", ARGS_SCRIPT)
    first = plain(tmp_path, "train.py", "--json", "x", "--", "-v")
    assert first.returncode == 4 and first.stderr == ""
    for options in (
        ["--json=report.json"],
        ["--"],
        ["--json", "report.json", "--"],
        ["--json=report.json", "--"],
    ):
        second = under(tmp_path, *options, "train.py", "--json", "x", "--", "-v")
        assert_same(first, second, options)
        assert second.stderr == "", (options, second.stderr)
        if any(option.startswith("--json") for option in options):
            assert load(tmp_path / "report.json")["error"] is None
            (tmp_path / "report.json").unlink()
        assert not (tmp_path / "x").exists()


def test_folder_with_main_runs_like_python_dir(tmp_path):
    app = tmp_path / "app"
    write(app, "helpers.py", "SCALE = 0.5\n")
    write(
        app,
        "__main__.py",
        """
        import sys

        import torch
        from helpers import SCALE
        from torch import nn

        torch.manual_seed(0)
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        loss = SCALE * model(torch.randn(4, 3)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(__name__, sys.argv, repr(loss.item()))
        sys.exit(3)
        """,
    )
    first, second, _ = compare(tmp_path, ["app", "--epochs", "1"], reports=0)
    assert first.returncode == 3 and first.stdout.startswith("__main__ ")
    assert second.stderr == first.stderr == ""


def test_warnings_torch_gives_the_caller_name_the_readers_line(tmp_path):
    # torch.autograd.grad warns with stacklevel=2: the line that called it, not a wrapper's.
    write(
        tmp_path,
        "train.py",
        """
        import torch
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(2):
            loss = model(torch.ones(2, 3)).pow(2).sum()
            opt.zero_grad()
            (g,) = torch.autograd.grad(loss, [model.weight], only_inputs=False, retain_graph=True)
            loss.backward()
            opt.step()
        print(round(g.sum().item(), 4))
        """,
    )
    bare = plain(tmp_path, "train.py")
    assert "train.py:8: FutureWarning: only_inputs argument is deprecated" in bare.stderr
    for args in (["train.py"], ["--try", "train.py"]):
        seen = under(tmp_path, *args)
        assert (seen.returncode, seen.stdout, seen.stderr) == (0, bare.stdout, bare.stderr)
