"""Run scenarios under torch in this interpreter and report each result as a line of JSON.

This file is run as a script, possibly by another Python that holds another torch, so it uses
only the standard library and torch, and stays compatible with Python 3.8. It reads one JSON
request on stdin:

    {"repro": DIR, "modules": {NAME: {"file": ..., "source": ...}},
     "jobs": [{"id": ..., "file": ..., "source": ...}, ...]}

and writes one JSON object per line on stdout: {"event": "ready", "environment": {...}} once
torch is imported, then {"event": "start", "id": ...} and {"event": "done", "id": ...,
"result": {...}} per job. Everything else the scenarios print is kept off that channel.
"""

import contextlib
import io
import json
import linecache
import os
import platform
import random
import re
import sys
import traceback
import warnings

SEED = 0
DIAGNOSER = "backtwice_diagnose"  # the module name the request's diagnoser is installed as
ANOMALY_NODE = re.compile(r"Error detected in (\w+)\.")
# What one job may print: the page shows every printed line, so past this it is a mistake.
MAX_PRINT_BYTES = 64 * 1024  # printed text plus the JSON of the printed values
MAX_TENSOR_ELEMENTS = 1024  # a printed tensor is recorded element by element


class TooMuchOutput(BaseException):
    """A job printed more than the page can show; a BaseException so scenarios cannot catch it."""


def encode(value):
    """Turn a printed value into JSON: numbers, strings, None, tensors as nested lists."""
    import torch

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        if value.numel() > MAX_TENSOR_ELEMENTS:
            raise TooMuchOutput(
                f"a tensor of {value.numel()} elements (at most {MAX_TENSOR_ELEMENTS})"
            )
        return {"tensor": value.detach().tolist(), "dtype": str(value.dtype).replace("torch.", "")}
    if isinstance(value, (list, tuple)):
        return [encode(item) for item in value]
    return {"repr": repr(value)}


def scenario_frames(tb, filename):
    """Keep only the traceback frames that belong to the scenario's own file."""
    return [frame for frame in traceback.extract_tb(tb) if frame.filename == filename]


def describe_exception(exc, filename, source_lines):
    """Record an exception: type, exact message, and the scenario line that raised."""
    frames = scenario_frames(exc.__traceback__, filename)
    line = frames[-1].lineno if frames else None
    code = source_lines[line - 1].strip() if line and line <= len(source_lines) else None
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "line": line,
        "code": code,
        "frames": "".join(traceback.format_list(frames)),
    }


def describe_anomaly(caught, filename, source_lines):
    """Find the backward node and forward line that anomaly mode names in its warning."""
    pattern = re.compile(r'File "' + re.escape(filename) + r'", line (\d+)')
    for warning in caught:
        text = str(warning.message)
        node = ANOMALY_NODE.search(text)
        if node is None:
            continue
        lines = [int(found) for found in pattern.findall(text)]
        line = lines[-1] if lines else None
        code = source_lines[line - 1].strip() if line and line <= len(source_lines) else None
        return {"node": node.group(1), "line": line, "code": code}
    return None


def execute(job, anomaly, around=None):
    """Run one job's source in a fresh namespace with a fixed seed; return what happened.

    `around`, if given, is a context manager the source runs inside (the diagnoser).
    """
    import torch

    random.seed(SEED)
    torch.manual_seed(SEED)
    printed = []
    size = [0]
    filename = job["file"]

    def recording_print(*args, sep=" ", end="\n", file=None, flush=False):
        caller = sys._getframe(1)
        text = sep.join(str(arg) for arg in args)
        line = caller.f_lineno if caller.f_code.co_filename == filename else None
        values = [encode(arg) for arg in args]
        size[0] += len(text) + len(json.dumps(values))
        if size[0] > MAX_PRINT_BYTES:
            raise TooMuchOutput(
                f"more than {MAX_PRINT_BYTES} bytes in {len(printed) + 1} print() calls"
            )
        printed.append({"line": line, "text": text, "values": values})

    namespace = {"__name__": "__main__", "__file__": filename, "print": recording_print}
    code = compile(job["source"], filename, "exec")
    # Source lines looked up by file name (tracebacks, the diagnoser) come from this text.
    linecache.cache[filename] = (len(job["source"]), None, job["source"].splitlines(True), filename)
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.set_detect_anomaly(anomaly), around or contextlib.nullcontext():
                exec(code, namespace)
        except Exception as exc:  # the scenario's own exception is the result
            error = exc
    return printed, error, caught


def outcome(printed, error):
    """What a run printed and raised, to compare two runs of one job."""
    raised = None if error is None else (type(error).__name__, str(error))
    return [p["text"] for p in printed], raised


def diagnose_job(job, diagnoser, plain):
    """Run a job under the diagnoser; return its report, the scenario named by its file name.

    `plain` is the plain run's outcome(); a run under the diagnoser that prints or raises
    anything else is reported as "changed", since observing must not change the outcome.
    """
    shown = os.path.basename(job["file"])
    around = diagnoser.diagnose(script=job["file"], shown=shown)
    printed, error, _ = execute(job, anomaly=False, around=around)
    report = around.report
    report["text"] = diagnoser.format_report(report) if report["error"] else None
    seen = outcome(printed, error)
    report["changed"] = (
        None if seen == plain else f"plain run {plain!r}, under the diagnoser {seen!r}"
    )
    return report


def run_job(job):
    """Run a job plainly, and again under anomaly mode when it raised."""
    lines = job["source"].splitlines()
    try:
        printed, error, _ = execute(job, anomaly=False)
    except TooMuchOutput as exc:
        return {"too_much_output": str(exc)}
    result = {"outputs": printed, "raised": None, "anomaly": None, "diagnosis": None}
    if error is not None:
        result["raised"] = describe_exception(error, job["file"], lines)
        _, _, caught = execute(job, anomaly=True)
        result["anomaly"] = describe_anomaly(caught, job["file"], lines)
    diagnoser = sys.modules.get(DIAGNOSER)
    if diagnoser is not None:
        result["diagnosis"] = diagnose_job(job, diagnoser, outcome(printed, error))
    return result


def install_module(name, filename, source):
    """Make `import name` give this source text, the one the snapshot hashed, not a reread file."""
    import types

    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)


LOOP_JOBS = ("loop ", "fix ")


def graph_depth(root):
    """Count the nodes on the longest path from a tensor's grad_fn to the end of the graph."""
    if getattr(root, "grad_fn", None) is None:
        return 0
    depth = {}
    stack = [(root.grad_fn, False)]
    while stack:
        node, children_done = stack.pop()
        if node in depth:
            continue
        children = [child for child, _ in node.next_functions if child is not None]
        if children_done:
            depth[node] = 1 + max((depth[child] for child in children), default=0)
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if child not in depth)
    return depth[root.grad_fn]


def _tensors(value):
    """The tensors a loop variable holds: itself, or the items of a list or tuple."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for item in value if isinstance(item, torch.Tensor)]
    return []


def saved_alive(namespace):
    """Count the saved tensors still readable in the graphs the loop's variables reach.

    Reading a node's _saved_* attribute changes nothing; a freed one raises, and is not counted.
    """
    import torch

    nodes, stack = set(), []
    for value in list(namespace.values()):
        stack.extend(t.grad_fn for t in _tensors(value))
    while stack:
        node = stack.pop()
        if node is None or node in nodes:
            continue
        nodes.add(node)
        stack.extend(child for child, _ in node.next_functions)
    alive = 0
    for node in nodes:
        for name in dir(node):
            if not name.startswith("_saved_"):
                continue
            try:
                value = getattr(node, name)
            except RuntimeError:
                continue
            alive += len(_tensors(value)) if not isinstance(value, torch.Tensor) else 1
    return alive


class Measure:
    """Record per step, outside the loop's source: graph depth of each backward or grad call,
    each parameter's gradient norm when an optimizer steps, and saved tensors alive at the
    step boundary. It adds no saved-tensor hooks, so autograd's own checks stay as they are."""

    def __init__(self, namespace, filename, for_line):
        self.namespace = namespace
        self.filename = filename
        self.for_line = for_line
        self.steps = {}
        self.names = None
        self.grads_at_boundary = False

    def step(self):
        number = self.namespace.get("step")
        return self.steps.setdefault(number, {"depths": [], "grads": {}, "saved": None})

    def backward_called(self, root):
        self.step()["depths"].append(graph_depth(root))

    def optimizer_steps(self, optimizer, args, kwargs):
        self.record_grads(p for group in optimizer.param_groups for p in group["params"])

    def record_grads(self, params):
        import torch

        if self.names is None:
            self.names = {}
            for var, module in sorted(self.namespace.items(), key=lambda item: item[0]):
                if isinstance(module, torch.nn.Module):
                    for name, param in module.named_parameters():
                        self.names[id(param)] = f"{var}.{name}"
        grads = self.step()["grads"]
        for param in params:
            norm = None if param.grad is None else float(f"{param.grad.norm().item():.6g}")
            grads[self.names.get(id(param), "?")] = norm

    def optimized(self):
        """The parameters of every optimizer among the loop's variables."""
        import torch

        for value in list(self.namespace.values()):
            if isinstance(value, torch.optim.Optimizer):
                for group in value.param_groups:
                    yield from group["params"]

    def trace(self, frame, event, arg):
        if frame.f_code.co_filename != self.filename:
            return None
        return self.trace_line

    def trace_line(self, frame, event, arg):
        if event == "line" and frame.f_lineno == self.for_line and "step" in self.namespace:
            self.step()["saved"] = saved_alive(self.namespace)
            if self.grads_at_boundary:
                self.record_grads(self.optimized())
        return self.trace_line

    def completed(self):
        """The steps that reached their end, as JSON."""
        done = []
        for number, facts in sorted(self.steps.items(), key=lambda item: item[0]):
            if facts["saved"] is None:
                continue
            grads = [{"name": k, "norm": v} for k, v in sorted(facts["grads"].items())]
            done.append(
                {"step": number, "depths": facts["depths"], "saved": facts["saved"], "grads": grads}
            )
        return done


def execute_loop(job, anomaly=False, measure=False):
    """Run a loop's source; return (error, namespace, Measure or None).

    With measure=True, torch.Tensor.backward, torch.autograd.grad and a global optimizer
    step hook are wrapped to record facts, and restored afterwards.
    """
    import torch

    random.seed(SEED)
    torch.manual_seed(SEED)
    filename = job["file"]
    namespace = {"__name__": "__main__", "__file__": filename}
    code = compile(job["source"], filename, "exec")
    lines = job["source"].splitlines()
    for_line = next(i for i, line in enumerate(lines, 1) if line.startswith("for step"))
    recorder = Measure(namespace, filename, for_line) if measure else None
    undo = []
    if recorder is not None:
        backward, grad = torch.Tensor.backward, torch.autograd.grad

        def measured_backward(self, *args, **kwargs):
            recorder.backward_called(self)
            return backward(self, *args, **kwargs)

        def measured_grad(outputs, *args, **kwargs):
            first = outputs if isinstance(outputs, torch.Tensor) else outputs[0]
            recorder.backward_called(first)
            return grad(outputs, *args, **kwargs)

        torch.Tensor.backward, torch.autograd.grad = measured_backward, measured_grad
        undo.append(lambda: setattr(torch.Tensor, "backward", backward))
        undo.append(lambda: setattr(torch.autograd, "grad", grad))
        try:
            from torch.optim.optimizer import register_optimizer_step_pre_hook
        except ImportError:  # torch before 2.0: gradients are read at the step boundary
            recorder.grads_at_boundary = True
        else:
            hook = register_optimizer_step_pre_hook(recorder.optimizer_steps)
            undo.append(hook.remove)
        sys.settrace(recorder.trace)
        undo.append(lambda: sys.settrace(None))
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.set_detect_anomaly(anomaly):
                exec(code, namespace)
        except Exception as exc:  # the loop's own exception is the result
            error = exc
        finally:
            for restore in reversed(undo):
                restore()
    return error, namespace, recorder, caught


def run_loop(job):
    """Run a checker loop plainly for its verdict and text, then again to measure it."""
    lines = job["source"].splitlines()
    error, namespace, _, _ = execute_loop(job)
    result = {"raised": None, "anomaly": None, "raised_step": None}
    if error is not None:
        result["raised"] = describe_exception(error, job["file"], lines)
        result["raised_step"] = namespace.get("step")
        _, _, _, caught = execute_loop(job, anomaly=True)
        result["anomaly"] = describe_anomaly(caught, job["file"], lines)
    error, namespace, recorder, _ = execute_loop(job, measure=True)
    measured = None
    if error is not None:
        measured = describe_exception(error, job["file"], lines)
        measured["step"] = namespace.get("step")
    result["measured_raised"] = measured
    result["steps"] = recorder.completed()
    return result


def environment():
    """Describe the interpreter, torch and device the capture runs on."""
    import torch

    cuda = torch.cuda.is_available()
    # '2.8.0+cu128': the public version is what readers install; the build tag says which wheel.
    public, _, build = torch.__version__.partition("+")
    return {
        "torch": public,
        "build": build,
        "python": platform.python_version(),
        "platform": platform.system() + " " + platform.machine(),
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "cuda": cuda,
    }


def main():
    """Serve one request from stdin."""
    request = json.loads(sys.stdin.read())
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray writes to fd 1 (C++ or scenarios) go to stderr, not the channel
    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)

    def send(message):
        channel.write(json.dumps(message, sort_keys=True) + "\n")
        channel.flush()

    sys.path.insert(0, request["repro"])
    import torch

    for name, module in sorted(request.get("modules", {}).items()):
        install_module(name, module["file"], module["source"])

    torch.set_num_threads(1)
    send({"event": "ready", "environment": environment()})
    for job in request["jobs"]:
        send({"event": "start", "id": job["id"]})
        run = run_loop if job["id"].startswith(LOOP_JOBS) else run_job
        send({"event": "done", "id": job["id"], "result": run(job)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
