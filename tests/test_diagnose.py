"""The diagnoser names the lines that marker comments in each realistic script point at."""

import contextlib
import io
import json
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from backtwice import diagnose

from . import warm
from .conftest import ROOT
from .diagnose_markers import (
    CASES,
    NAMES,
    RAISING,
    WRONG,
    beyond,
    check_clean,
    check_fix,
    check_labels,
    check_places,
    check_report,
    expected,
)

MODULE = [sys.executable, "-m", "backtwice.diagnose"]
# Reach answers CONTRACTS.md gives the checker that its branch adds (not yet in this checker).
PENDING = {"reach": {"lstm-both", "frozen", "bank"}}


def report_for(path, python=None, cwd=None):
    """Run a script under the diagnoser in a fresh interpreter; return its JSON report."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "report.json"
        command = [python or sys.executable, diagnose.__file__, "--json", str(out), str(path)]
        subprocess.run(command, cwd=cwd, capture_output=True, check=False)
        return json.loads(out.read_text(encoding="utf-8"))


def relative(name):
    return str(Path("tests") / "diagnose_cases" / name)


def run(command):
    """`python ARGS` from ROOT (command[0] is sys.executable), in a fork of the warm
    interpreter (tests/warm.py)."""
    assert command[0] == sys.executable, command
    return warm.run(command[1:], ROOT)


def run_here(args, plain=False):
    """Run the diagnoser's main (or, plain, the script alone) in this process from ROOT."""
    saved = (list(sys.argv), list(sys.path), os.getcwd())
    out, err = io.StringIO(), io.StringIO()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if plain:
                sys.argv = list(args)
                try:
                    runpy.run_path(args[0], run_name="__main__")
                    code = 0
                except SystemExit as exc:
                    code = exc.code
            else:
                try:
                    code = diagnose.main(list(args))
                except SystemExit as exc:
                    code = exc.code
    finally:
        sys.argv, sys.path[:] = saved[0], saved[1]
        os.chdir(saved[2])
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Every case run once under the diagnoser with --json: name -> (process, report)."""
    out = tmp_path_factory.mktemp("reports")
    found = {}
    for path in sorted(CASES.glob("*.py")):
        target = out / (path.stem + ".json")
        process = run_here(["--json", str(target), relative(path.name)])
        found[path.name] = (process, json.loads(target.read_text(encoding="utf-8")))
    return found


@pytest.mark.parametrize("name", RAISING)
def test_names_raising_freeing_and_forward_lines(reports, name):
    process, report = reports[name]
    assert process.returncode == 1, process.stderr
    check_places(report, name, relative(name))


@pytest.mark.parametrize("name", RAISING)
def test_labelled_lines_in_source_order(reports, name):
    check_labels(reports[name][1], name)


@pytest.mark.parametrize("name", RAISING)
def test_fix_names_the_lines_and_fits_the_cause(reports, name):
    check_fix(reports[name][1], name, relative(name))


@pytest.mark.parametrize("name", sorted(set(NAMES) - set(RAISING)))
def test_clean_cases_report_no_cause(reports, name):
    process, report = reports[name]
    ended = expected(name)[1].get("ended")
    # A clean case runs to its end (an error not the diagnoser's to explain is marked).
    assert process.returncode == (1 if ended else 0), process.stderr
    check_clean(report, name)


@pytest.mark.parametrize("name", RAISING)
def test_report_on_stderr_after_the_traceback(reports, name):
    process, report = reports[name]
    text = diagnose.format_report(report)
    stderr = process.stderr
    if any(f["applicability"] == "machine" for f in report["fixes"]):
        offer = f"python -m backtwice.diagnose --try {relative(name)}\n"
        assert stderr.endswith(offer) and "to try each fix on" in stderr
        stderr = stderr[: stderr.rindex("\n", 0, -1) + 1]
    assert stderr.endswith("\n" + text + "\n")
    assert stderr.count(text) == 1
    traceback_end = stderr.index(text)
    assert stderr[:traceback_end].rstrip().splitlines()[-1].startswith("RuntimeError: ")
    assert "cause: " + report["cause"] in text and "fix: " + report["fix"] in text


def test_cases_leave_no_hooks_and_no_profiler_behind(reports):
    # A burst pops the hooks and sets a profiler until its call returns; every case ran in
    # this process, so anything left over would show here.
    import torch

    assert torch.autograd.graph.saved_tensors_hooks  # torch imported by the cases
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None
    assert sys.getprofile() is None


def test_an_rnn_call_stands_for_the_tensors_it_saves(tmp_path):
    # After BURST tensors from one call (an RNN's, hundreds a step), the rest are saved
    # without the hooks; its outputs carry the reader's line, and the hooks are back after it.
    import torch
    from torch import nn

    torch.manual_seed(0)
    rnn = nn.GRU(3, 8)
    with diagnose.diagnose() as run:
        out, h = rnn(torch.randn(40, 2, 3))  # the line
        line = sys._getframe().f_lineno - 1
        state = run.state
        assert torch._C._autograd._top_saved_tensors_default_hooks(False)[0] == state._pack
        assert sys.getprofile() is None
    for node in (out.grad_fn, h.grad_fn):
        region = node.metadata[diagnose.REGION]
        assert region[0] is sys._getframe().f_code and region[1] == line
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None


def test_phrases_are_not_found_in_file_names():
    # A fix that names hidden_detach.py:12 does not thereby say "hidden" or "detach".
    report = {"fix": "Do something else at hidden_detach.py:12.", "lines": []}
    report.update(dict.fromkeys(("cause", "raised", "freed_by", "node", "checker")))
    headers = {"fix": ["detach"], "cause": ["carried-state"]}
    with pytest.raises(AssertionError):
        check_fix(report, "hidden_detach.py", "hidden_detach.py", ({"raises": [12]}, headers))


@pytest.mark.parametrize("name", WRONG)
def test_pending_cases_are_still_diagnosed_wrong(name, tmp_path):
    # Each has its markers worked out as the others were; once the diagnoser gets one right,
    # this fails: move the case into tests/diagnose_cases/ (and recapture).
    target, shown = tmp_path / "report.json", str(Path("tests") / "diagnose_pending" / name)
    run_here(["--json", str(target), shown])
    report = json.loads(target.read_text(encoding="utf-8"))
    with pytest.raises(AssertionError):
        check_report(report, name, shown)


def test_calls_numbered_in_order(reports):
    report = reports["gan.py"][1]
    assert (report["freed_by"]["call"], report["raised"]["call"]) == (1, 2)
    report = reports["saved_attr.py"][1]
    assert report["raised"]["call"] is None and report["freed_by"]["call"] == 1


def test_helper_called_from_two_places_is_two_sites(reports):
    # Both calls run the helper's one backward line; compared by the innermost frame alone they
    # would look like one site whose previous run built the forward (carried-state).
    report = reports["helper_two_sites.py"][1]
    assert report["raised"]["line"] == report["freed_by"]["line"]
    assert report["cause"] == "shared-forward"


def test_double_traversal_reported_in_json_and_as_warning(reports):
    lines, _ = expected("double_traversal.py")
    process, report = reports["double_traversal.py"]
    assert process.returncode == 0
    assert report["error"] is None and report["cause"] is None
    (entry,) = report["double_traversals"]
    assert entry["first"]["line"] == lines["first"][0]
    assert entry["second"]["line"] == lines["second"][0]
    assert (entry["first"]["call"], entry["second"]["call"]) == (1, 2)
    assert process.stderr.count("warning:") == 1
    assert diagnose.ISSUE_13494 in process.stderr


def test_clean_run_json_has_the_fixed_shape(reports):
    process, report = reports["clean.py"]
    assert process.returncode == 0 and process.stderr == ""
    assert report == {
        "torch": report["torch"],
        "error": None,
        "cause": None,
        "raised": None,
        "freed_by": None,
        "node": None,
        "fix": None,
        "checker": None,
        "lines": [],
        "double_traversals": [],
        "fixes": [],
    }
    import torch

    assert report["torch"] == torch.__version__


def test_clean_script_prints_the_same_numbers_and_exit_status():
    script = relative("clean.py")
    plain = run([sys.executable, script, "3"])
    under = run([*MODULE, script, "3"])
    assert plain.returncode == under.returncode == 3
    assert under.stdout == plain.stdout
    assert "['3']" in plain.stdout and plain.stdout.count("\n") == 21
    assert under.stderr == plain.stderr == ""


def test_other_exception_keeps_its_own_traceback(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text(
        "import torch\n\n\ndef load(path):\n    return open(path).read()\n\n\n"
        "print((torch.ones(2) * 2).tolist())\nload('no/such/file.txt')\n"
    )
    plain = run([sys.executable, str(script)])
    under = run([*MODULE, str(script)])
    assert plain.returncode == under.returncode == 1
    assert under.stdout == plain.stdout == "[2.0, 2.0]\n"
    assert under.stderr == plain.stderr
    assert "FileNotFoundError" in plain.stderr


def test_inplace_error_is_torchs_own(tmp_path):
    # Saved-tensor hooks switch off torch's in-place check; the diagnoser restores it, with
    # torch's exact text (a saved output, a saved intermediate, a saved leaf).
    script = tmp_path / "inplace.py"
    script.write_text(
        "import torch\n"
        "x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\n"
        "for make in ('output', 'middle', 'leaf'):\n"
        "    try:\n"
        "        if make == 'output':\n"
        "            y = x.exp(); y.add_(1); y.sum().backward()\n"
        "        elif make == 'middle':\n"
        "            y = x * 2; z = y * y; y.add_(1); z.sum().backward()\n"
        "        else:\n"
        "            b = torch.ones(2, 3); w = b * x; b.add_(1); w.sum().backward()\n"
        "    except RuntimeError as exc:\n"
        "        print(exc)\n"
        "y = x.sigmoid(); y.mul_(2); y.sum().backward()\n"
    )
    plain = run([sys.executable, str(script)])
    under = run([*MODULE, str(script)])
    assert plain.stdout.count("modified by an inplace operation") == 3
    assert under.stdout == plain.stdout
    assert under.returncode == plain.returncode == 1
    assert under.stderr == plain.stderr


def test_torch_func_transforms_run_unchanged(tmp_path):
    script = tmp_path / "func.py"
    script.write_text(
        "import torch\n"
        "x = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)\n"
        "print(torch.func.grad(lambda a: a.exp().sum())(x).tolist())\n"
        "print(torch.func.jacrev(torch.sin)(x).diagonal().tolist())\n"
        "print(torch.vmap(torch.cos)(x.detach()).tolist())\n"
        "(x * x).sum().backward()\n"
        "print(x.grad.tolist())\n"
    )
    plain = run_here([str(script)], plain=True)
    under = run_here([str(script)])
    assert plain.returncode == under.returncode == 0
    assert under.stdout == plain.stdout
    assert under.stderr == diagnose.PREFIX + "not recording inside torch.func transforms\n"


def test_script_runs_as_main_with_its_argv_and_folder(tmp_path):
    (tmp_path / "helper_module.py").write_text("VALUE = 'found beside the script'\n")
    script = tmp_path / "show.py"
    script.write_text(
        "import sys\nimport helper_module\n"
        "print(__name__, sys.argv, helper_module.VALUE)\n"
        "print(__file__ == sys.argv[0] or __file__.endswith(sys.argv[0]))\n"
    )
    under = run_here([str(script), "-x", "--json", "y"])
    assert under.returncode == 0, under.stderr
    assert under.stdout == (
        f"__main__ {[str(script), '-x', '--json', 'y']} found beside the script\nTrue\n"
    )


def test_missing_script_one_line_exit_2(tmp_path):
    process = run_here(["--json", str(tmp_path / "r.json"), "missing/train.py"])
    assert process.returncode == 2
    assert process.stderr == "missing/train.py: no such script, nothing was run\n"
    assert process.stdout == ""
    assert not (tmp_path / "r.json").exists()


def test_no_script_prints_usage_exit_2():
    process = run_here([])
    assert (process.returncode, process.stderr) == (2, diagnose.USAGE + "\n")


def test_copied_file_runs_on_its_own(tmp_path):
    copy = tmp_path / "diagnose.py"
    copy.write_text(Path(diagnose.__file__).read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "r.json"
    process = subprocess.run(
        [sys.executable, str(copy), "--json", str(out), relative("gan.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert process.returncode == 1
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["cause"] == "shared-forward"
    assert report["raised"]["line"] == expected("gan.py")[0]["raises"][0]
    # its offer to try the fixes names the copy, the command the reader ran, not a module
    # the reader may not have
    assert any(fix["applicability"] == "machine" for fix in report["fixes"])
    assert process.stderr.endswith(f"python {copy} --try {relative('gan.py')}\n")


def test_report_for_runs_a_script_and_returns_its_report():
    report = report_for(relative("multitask.py"), cwd=ROOT)
    assert report["cause"] == "shared-forward"
    assert report["node"]["line"] == expected("multitask.py")[0]["forward"][0]


def test_context_manager_reports_in_process(tmp_path, capsys):
    import torch

    out = tmp_path / "r.json"
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError) as caught, diagnose.diagnose(json_path=str(out)):
        loss = (x * x).sum()  # the forward line
        loss.backward()
        loss.backward()
    report = json.loads(out.read_text(encoding="utf-8"))
    here = Path(__file__).read_text().splitlines()
    assert here[report["node"]["line"] - 1].strip().endswith("# the forward line")
    assert report["raised"]["line"] == report["freed_by"]["line"] + 1
    assert report["cause"] == "same-loss-twice"
    assert capsys.readouterr().err == diagnose.format_report(report) + "\n"  # once, no note
    assert not hasattr(caught.value, "__notes__")
    assert torch.autograd.backward.__module__ == "torch.autograd"


def test_trained_parameters_found_without_scanning_every_object(monkeypatch):
    # The optimizers that stepped come from the step hook: a reader's process may hold millions
    # of objects, and gc.get_objects() over them all at error time took 90 ms with torch alone.
    import gc

    def refuse():
        raise AssertionError("gc.get_objects() called")

    monkeypatch.setattr(gc, "get_objects", refuse)
    result = run_here([relative("before_loop.py")])
    assert result.returncode == 1
    assert "parameters the optimizer trains" in result.stderr
    assert "gc.get_objects" not in result.stderr


def test_carried_names_are_what_a_pass_reads_and_writes_again(tmp_path):
    # Read by hand: h is read and written on its line; mem is read on line 4 and written after
    # it; x and s are made afresh each pass; self.v is read on line 8 and written after it.
    source = (
        "for s in range(3):\n"
        "    x = f(s)\n"
        "    out, h = rnn(x, h)\n"
        "    m = g(h, mem)\n"
        "    mem = m.mean()\n"
        "class Cell:\n"
        "    def forward(self, x):\n"
        "        spike = fire(self.v)\n"
        "        self.v = self.v - spike\n"
    )
    path = tmp_path / "carried.py"
    path.write_text(source, encoding="utf-8")
    found = {line: diagnose._carried_names(str(path), line) for line in range(1, 10)}
    assert found[2] == [] and found[3] == ["h"] and found[4] == ["mem"] and found[5] == []
    assert found[8] == ["self.v"]
    assert diagnose._carried_names(str(path), 4, whole=True) == ["h", "mem"]
    assert diagnose._loops(str(path), 4) == [(1, 5)] and diagnose._loops(str(path), 8) == []


OTHER_PYTHONS = [p for p in os.environ.get("DIAGNOSE_PYTHONS", "").split(os.pathsep) if p] or [
    pytest.param(
        None,
        marks=pytest.mark.skip(
            reason="set DIAGNOSE_PYTHONS=/path/to/torch-X/bin/python[:...] to run the cases "
            "under other torch versions"
        ),
    )
]


@pytest.mark.parametrize("python", OTHER_PYTHONS)
def test_cases_under_other_torch(python):
    # DIAGNOSE_PYTHONS=/path/to/torch-2.0.1/bin/python:... runs every case with that torch.
    for name in NAMES:
        report = report_for(relative(name), python=python, cwd=ROOT)
        if not beyond(name, report["torch"]):
            check_report(report, name, relative(name))


def test_checker_fragments_select_checker_answers():
    # Each fragment names questions and options the page's checker offers; a fragment that
    # answers all four questions is a combination that has a captured loop.
    from backtwice import checker, manifest

    options = {name: {value for value, _ in choices} for name, _, _, choices in checker.QUESTIONS}
    keys = {a.key for a in manifest.load_loop_builder(ROOT / "repro").all_answers()}
    for cause, fragment in diagnose.CHECKER.items():
        answers = dict(part.split("=") for part in fragment.lstrip("#").split("&"))
        assert set(answers) <= set(checker.NAMES), cause
        pending = any(value in PENDING.get(name, ()) for name, value in answers.items())
        assert all(
            value in options[name] or value in PENDING.get(name, ())
            for name, value in answers.items()
        ), cause
        if len(answers) == len(checker.NAMES) and not pending:
            assert "-".join(answers[name] for name in checker.NAMES) in keys, cause


def test_notebook_extension_names_cells_and_keeps_recording(capsys):
    # `%load_ext backtwice.diagnose` in IPython's own shell: the diagnoser stays on across
    # cells; running the cell that calls backward again is same-loss-twice, with both cells.
    shell_module = pytest.importorskip("IPython.core.interactiveshell")
    shell = shell_module.InteractiveShell.instance()
    try:
        shell.run_cell("%load_ext backtwice.diagnose")
        cells = [
            "import torch\nx = torch.ones(3, requires_grad=True)\nloss = (x.exp() * 2).sum()",
            "loss.backward()",
            "print('again')\nloss.backward()",
        ]
        results = [shell.run_cell(cell, store_history=True) for cell in cells]
        report = diagnose._active().report
    finally:
        shell.run_cell("%unload_ext backtwice.diagnose")
        shell_module.InteractiveShell.clear_instance()
    first = results[0].execution_count
    assert results[1].error_in_exec is None
    assert isinstance(results[2].error_in_exec, RuntimeError)
    assert report["cause"] == "same-loss-twice"
    lines = {e["kind"]: (e["file"], e["line"]) for e in report["lines"]}
    assert lines == {
        "forward": (f"In [{first}]", 3),
        "frees": (f"In [{first + 1}]", 1),
        "raises": (f"In [{first + 2}]", 2),
    }
    assert f"In [{first + 2}], line 2" in report["fix"]
    assert f"In [{first + 1}], line 1" in report["fix"]
    assert capsys.readouterr().err.count("cause: same-loss-twice") == 1
    assert diagnose._active() is None
