"""Run scenarios under torch, each in a fresh fork of this interpreter, and report each result.

This file is run as a script, possibly by another Python that holds another torch, so it uses
only the standard library and torch, and stays compatible with Python 3.8. It is started as
`python harness.py CHANNEL_FD`, imports torch, and then reads one JSON request, a line, on stdin
(the build starts it before it has read repro/, so that both go on at once):

    {"repro": DIR, "modules": {NAME: {"file": ..., "source": ...}},
     "jobs": [{"id": ..., "file": ..., "source": ...}, ...]}

and writes one JSON object per line on the file descriptor CHANNEL_FD: {"event": "ready",
"environment": {...}} once torch is imported and warmed up. It then reads a second line on
stdin, {"jobs": [...]}: more jobs, which the build chooses once it knows the environment (a
diagnoser case whose report the snapshot of that same environment holds is not run again); an
end of input is no more jobs. Then {"event": "start", "id": ...} and {"event": "done", "id":
..., "result": {...}} (or "crashed": {...}) per job, the first line's jobs first. Whatever the
interpreter or the scenarios write to stdout or stderr never reaches that channel.

It is a fork server, as DataLoader workers start: torch is imported once, then every job runs
in a child forked from that state, in repro/ as its working folder, so what a job changes
(os.environ, the working folder, torch's default dtype, imported modules) dies with it, as it
would with `cd repro && python X.py`. This process is a child subreaper: whatever a job starts,
detached or not, comes back to it when the job ends and is killed then, and when the build
stops (SIGTERM, SIGHUP, or the build's own death, through PR_SET_PDEATHSIG).
"""

import ast
import contextlib
import io
import json
import linecache
import os
import platform
import random
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings

SEED = 0
# The kernels every x86-64 processor runs alike, so that any machine captures the same bytes:
# left to choose, torch's own kernels (ATen), MKL's matrix products and oneDNN's RNNs each pick
# the widest vector unit there is, and AVX-512 and AVX2 round differently in the last digit of
# a gradient's norm. MKL's "compatible" path gives the same results on Intel and AMD alike.
# They are read when each library first runs, so they are set before torch is imported; a
# scenario sees them in os.environ. Other architectures ignore them.
PINNED_KERNELS = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
}
# Environment variables that torch, its kernels (MKL, oneDNN, OpenMP) or CUDA read, by the
# start of their names (TORCH_SHOW_CPP_STACKTRACES, for one, changes torch's messages): the
# capture reports a hash of those it started with, and a build reuses a diagnoser case's
# report only from a capture under the same ones.
VARIABLES = (
    "TORCH",
    "PYTORCH",
    "ATEN_",
    "MKL_",
    "ONEDNN_",
    "DNNL_",
    "OMP_",
    "KMP_",
    "CUDA",
    "CUBLAS",
)
# Except what torch sets for itself (importing torch._dynamo puts its cache folder in
# os.environ, so a build started by a process that imported it, a test, inherits that), and
# the thread counts, which the capture pins to one whatever they say (serve()).
OWN_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
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


_START = {}
_CPU_ONLY = []  # [True] once the server knows no accelerator is there


def no_accelerator():
    """Whether torch sees no CUDA, XPU, MTIA or MPS device (those it has a module for)."""
    import torch

    modules = [getattr(torch, name, None) for name in ("cuda", "xpu", "mtia")]
    modules.append(getattr(torch.backends, "mps", None))
    checks = [getattr(module, "is_available", None) for module in modules]
    return not any(check() for check in checks if callable(check))


def seed():
    """Seed Python and torch as random.seed(SEED) and torch.manual_seed(SEED) do. Where no
    accelerator is there, torch's CPU generator only: torch.manual_seed also queues a seed for
    each device not yet in use, formatting the stack for each (a third of a millisecond in a
    job), and those queued calls could never run. The CPU generator's state is the same."""
    import torch

    random.seed(SEED)
    if _CPU_ONLY:
        torch.default_generator.manual_seed(SEED)
    else:
        torch.manual_seed(SEED)


def remember_state():
    """Note the state a job's fork starts in, to put back before each of its runs."""
    import torch

    _START.update(
        environ=dict(os.environ),
        cwd=os.getcwd(),
        argv=list(sys.argv),
        path=list(sys.path),
        dtype=torch.get_default_dtype(),
        grad=torch.is_grad_enabled(),
    )


def restore_state():
    """Put back what an earlier run of the same job changed: a job runs its source two or three
    times (plainly, under anomaly mode, measured or diagnosed) in one fork, and each run must
    start as the first did. Jobs never share a fork."""
    if not _START:
        return
    import torch

    if dict(os.environ) != _START["environ"]:
        os.environ.clear()
        os.environ.update(_START["environ"])
    os.chdir(_START["cwd"])
    sys.argv[:] = _START["argv"]
    sys.path[:] = _START["path"]
    torch.set_default_dtype(_START["dtype"])
    torch.set_grad_enabled(_START["grad"])


def execute(job, anomaly, around=None):
    """Run one job's source in a fresh namespace with a fixed seed; return what happened.

    `around`, if given, is a context manager the source runs inside (the diagnoser).
    """
    import torch

    restore_state()
    seed()
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


CASE_JOBS = "case "


def relative_to(value, folder):
    """The report with every mention of `folder` dropped from its text: paths as the case's own
    folder names them, not this machine's."""
    if isinstance(value, dict):
        return {key: relative_to(item, folder) for key, item in value.items()}
    if isinstance(value, list):
        return [relative_to(item, folder) for item in value]
    if isinstance(value, str):
        return value.replace(folder + os.sep, "")
    return value


def run_case(job):
    """Run a diagnoser test case under the diagnoser, as `cd CASES && python diagnose.py
    --json R NAME.py` would; return how it ended and the report, paths relative to its folder."""

    diagnoser = sys.modules[DIAGNOSER]
    filename = job["file"]
    around = diagnoser.diagnose(script=filename, shown=os.path.basename(filename))
    seed()
    namespace = {"__name__": "__main__", "__file__": filename}
    code = compile(job["source"], filename, "exec")
    linecache.cache[filename] = (len(job["source"]), None, job["source"].splitlines(True), filename)
    ended = None
    try:
        with around:
            exec(code, namespace)
    except (Exception, SystemExit) as exc:  # the case's own ending is the result
        ended = type(exc).__name__
    report = dict(around.report)
    del report["torch"]  # the snapshot's environment names it, without the build tag
    return {"ended": ended, "report": relative_to(report, os.path.dirname(filename))}


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

    def __init__(self, namespace):
        self.namespace = namespace
        self.steps = {}
        self.names = None
        self.grads_at_boundary = False

    def step(self):
        number = self.namespace.get("step")
        return self.steps.setdefault(number, {"depths": [], "grads": {}, "saved": None})

    def backward_called(self, root):
        self.step()["depths"].append(graph_depth(root))

    def optimizer_steps(self, optimizer, args, kwargs):
        """Record the gradients step() reads: now, or, where step() is given a closure that
        computes them (L-BFGS calls it several times), after each call of the closure."""
        params = [p for group in optimizer.param_groups for p in group["params"]]
        closure = kwargs.get("closure", args[1] if len(args) > 1 else None)  # args[0]: optimizer
        if closure is None:
            self.record_grads(params)
            return None

        def recorded():
            loss = closure()
            self.record_grads(params)
            return loss

        if "closure" in kwargs:
            return args, {**kwargs, "closure": recorded}
        return (args[0], recorded, *args[2:]), kwargs

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

    def steps_of(self, items):
        """Yield the step loop's items; each time the loop asks for the next item (or finds none
        left), a step has ended: note what is still saved, before the loop rebinds its names."""
        for item in items:
            yield item
            self.step()["saved"] = saved_alive(self.namespace)
            if self.grads_at_boundary:
                self.record_grads(self.optimized())

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


STEPS_OF = "__backtwice_steps_of__"


def measured_code(source, filename):
    """Compile a loop for its measured run, its `for step ...` iterable wrapped in
    STEPS_OF(...), which marks each step's end where a trace function would see the for line
    run again. Unlike sys.settrace, this costs nothing in any other frame (on Python 3.11 a
    trace function slows every frame: a sixth of the loops' capture time). Line numbers stay."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    (loop,) = [
        node
        for node in tree.body
        if isinstance(node, ast.For) and lines[node.lineno - 1].startswith("for step")
    ]
    name = ast.copy_location(ast.Name(STEPS_OF, ast.Load()), loop.iter)
    loop.iter = ast.copy_location(ast.Call(name, [loop.iter], []), loop.iter)
    return compile(tree, filename, "exec")


def execute_loop(job, anomaly=False, measure=False):
    """Run a loop's source; return (error, namespace, Measure or None).

    With measure=True, torch.Tensor.backward, torch.autograd.grad and a global optimizer
    step hook are wrapped to record facts, and restored afterwards.
    """
    import torch

    restore_state()
    seed()
    filename = job["file"]
    namespace = {"__name__": "__main__", "__file__": filename}
    if measure:
        code = measured_code(job["source"], filename)
        recorder = Measure(namespace)
        namespace[STEPS_OF] = recorder.steps_of
    else:
        code = compile(job["source"], filename, "exec")
        recorder = None
    # Tracebacks read the loop's lines from here, as they would from its file; without them
    # every stack torch formats (anomaly mode records one per op, a CUDA seed one per call)
    # searches sys.path for a file named "<loop ...>".
    linecache.cache[filename] = (len(job["source"]), None, job["source"].splitlines(True), filename)
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
    """Run a checker loop plainly for its verdict and text, then again to measure it.

    Unlike a scenario, a loop is not run again under anomaly mode: nothing shown reads what it
    names, and in a fresh fork that run took a quarter of the loops' capture time
    (tests/test_loops.py checks each loop's forward line against anomaly mode instead)."""
    lines = job["source"].splitlines()
    error, namespace, _, _ = execute_loop(job)
    result = {"raised": None, "raised_step": None}
    if error is not None:
        result["raised"] = describe_exception(error, job["file"], lines)
        result["raised_step"] = namespace.get("step")
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


def variables_digest(environ):
    """sha256 of the VARIABLES in an environment, names and values, but OWN_VARIABLES."""
    import hashlib

    text = "".join(
        name + "=" + environ[name] + "\n"
        for name in sorted(environ)
        if name.startswith(VARIABLES) and name not in OWN_VARIABLES
    )
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


PR_SET_PDEATHSIG = 1  # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36
_LIBC = []


def prctl(option, value):
    """Call Linux's prctl(option, value); return False where there is none (not Linux)."""
    try:
        if not _LIBC:
            import ctypes

            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        return _LIBC[0].prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(signum):
    """Get `signum` when the parent dies; exit now if it already has."""
    parent = os.getppid()
    prctl(PR_SET_PDEATHSIG, signum)
    if os.getppid() != parent:  # it died before the request above took effect
        os._exit(1)


def descendants(root):
    """Every process below `root`, from /proc (empty where there is no /proc)."""
    children = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:  # it ended while we looked
            continue
        parent = int(stat[stat.rindex(b")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def own_children():
    """This process's children, those of every thread (Linux's /proc/PID/task/TID/children,
    else a scan of /proc)."""
    pid = os.getpid()
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(child) for child in handle.read().split())
    except OSError:
        return descendants(pid)
    return found


class Children:
    """The server's children: jobs, the spare fork waiting for a job, and orphans to kill.

    Every process a job starts comes back to this process when its parent ends, since this
    one is a child subreaper; whatever is neither a running job nor the spare is killed as
    soon as a job ends.
    """

    def __init__(self):
        self.ended = {}  # pid -> wait status, of children reaped while waiting for another

    def reap(self):
        """Collect every ended child's status without waiting."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.ended[pid] = status

    def poll(self):
        """A child that has ended, as (pid, wait status), or (None, None) if none has."""
        self.reap()
        if not self.ended:
            return None, None
        found = next(iter(self.ended))
        return found, self.ended.pop(found)

    def wait(self, pid=None):
        """Wait for a child (any, or `pid`) to end; return (pid, wait status)."""
        while not self.ended or (pid is not None and pid not in self.ended):
            try:
                found, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return pid, 0
            self.ended[found] = status
        found = pid if pid is not None else next(iter(self.ended))
        return found, self.ended.pop(found)

    def kill_all_but(self, keep=(), patience=5.0):
        """SIGKILL every process below this one but those in `keep`, detached ones included."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            self.reap()
            left = [pid for pid in own_children() if pid not in keep and pid not in self.ended]
            if not left:
                break
            for pid in [*left, *(d for c in left for d in descendants(c))]:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)
        self.ended = {pid: status for pid, status in self.ended.items() if pid in keep}


CHILDREN = Children()


def _stop_server(signum, frame):
    CHILDREN.kill_all_but()
    os._exit(128 + signum)


def last_line(handle):
    """The last non-blank line written to a file, decoded whatever its bytes."""
    handle.seek(0)
    lines = [line.strip() for line in handle.read().splitlines() if line.strip()]
    return lines[-1].decode("utf-8", "backslashreplace") if lines else ""


_REQUEST = []  # the file descriptor the request comes on: a fork closes it


def read_line(fd):
    """Read one line from a file descriptor, up to its newline or the end of input."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    return data


def run_fork(body):
    """Be a fork of the server for body()'s length, then end it; never return.

    The fork dies with the server, and what it or its jobs start comes back to it (a child
    subreaper). It exits 0 once body() returns, or 70 after printing what it raised.
    """
    code = 70
    try:
        while _REQUEST:  # the server's, for the jobs the build sends later: not a job's
            os.close(_REQUEST.pop())
        die_with_parent(signal.SIGKILL)
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        CHILDREN.ended.clear()
        body()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class Spare:
    """A fork of the server made ahead of time, which runs the job it is then given.

    Forking copies the interpreter's page tables, which takes a while with torch loaded; the
    next job's fork is made while this one runs, so that cost is not waited for.
    """

    def __init__(self, jobs, repro, channel):
        self.result = tempfile.TemporaryFile()
        self.output = tempfile.TemporaryFile()
        read, self.go = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.go)
            run_fork(lambda: self.serve(jobs, repro, channel, read))
        os.close(read)

    def serve(self, jobs, repro, channel, go):
        """In the fork, through run_fork(): wait for a job's number, run that job, write its
        result."""
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.close(channel)  # only the server speaks on the channel
        os.dup2(self.output.fileno(), 1)
        os.dup2(self.output.fileno(), 2)
        os.chdir(repro)
        chosen = b""
        while True:
            chunk = os.read(go, 64)
            if not chunk:
                break
            chosen += chunk
        if not chosen:  # no job left: the server is done
            return
        job = jobs[int(chosen)]
        sys.argv = [os.path.basename(job["file"])]
        if job["id"].startswith(CASE_JOBS):  # a case runs in its own folder
            os.chdir(os.path.dirname(job["file"]))
        remember_state()
        run = run_loop if job["id"].startswith(LOOP_JOBS) else run_job
        run = run_case if job["id"].startswith(CASE_JOBS) else run
        data = json.dumps(run(job), sort_keys=True).encode("ascii")
        CHILDREN.kill_all_but()  # what the job started ends with it
        os.write(self.result.fileno(), data)

    def start(self, number):
        """Give the fork its job."""
        with contextlib.suppress(OSError):  # a fork that died is reported by finish()
            os.write(self.go, str(number).encode("ascii"))
        os.close(self.go)

    def finish(self, status):
        """Read the ended job's result, or say how it crashed."""
        try:
            self.result.seek(0)
            data = self.result.read()
            if status == 0 and data:
                return {"result": json.loads(data.decode("ascii"))}
            if os.WIFSIGNALED(status):
                how = f"was killed by signal {os.WTERMSIG(status)}"
            else:
                how = f"exited with code {os.WEXITSTATUS(status)}"
            return {"crashed": {"how": how, "last": last_line(self.output)}}
        finally:
            self.result.close()
            self.output.close()

    def dismiss(self, children):
        """Tell an unused fork there is no job, and collect it."""
        os.close(self.go)
        children.wait(self.pid)
        self.result.close()
        self.output.close()


class Probe:
    """A fork that asks torch which devices there are, so that this process never does.

    Asking initializes the device's driver (torch.cuda.is_available() does, and naming the
    device initializes CUDA itself), and a fork of a process that has done so cannot use the
    device: on a machine with a GPU every job would be such a fork ("Cannot re-initialize CUDA
    in forked subprocess"). It runs while the server warms up.
    """

    def __init__(self):
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(read)
            run_fork(lambda: self.serve(write))
        os.close(write)
        self.read = read

    @staticmethod
    def serve(write):
        """In the fork, through run_fork(): write what environment() finds, as JSON."""
        found = environment()
        found["no_accelerator"] = not found["cuda"] and no_accelerator()
        os.write(write, json.dumps(found, sort_keys=True).encode("ascii"))

    def result(self, children):
        """The environment the fork found, once it has ended; say so if it found none."""
        data = b""
        while True:
            chunk = os.read(self.read, 65536)
            if not chunk:
                break
            data += chunk
        os.close(self.read)
        _, status = children.wait(self.pid)
        if status != 0 or not data:
            raise RuntimeError(f"asking torch which devices there are failed (status {status})")
        return json.loads(data.decode("ascii"))


WARM_UP = """\
import torch
model = torch.nn.Linear(2, 1)
rnn = torch.nn.LSTM(2, 2, batch_first=True)
optimizer = torch.optim.SGD([*model.parameters(), *rnn.parameters()], lr=0.1)
for step in range(1, 3):
    optimizer.zero_grad()
    out, (h, c) = rnn(torch.ones(1, 2, 2))
    loss = model(out).sum()
    loss.backward()
    optimizer.step()
print("warm", loss, [step])
loss.backward()
"""


def warm_up():
    """Do once here what every job would otherwise do on its own first, and throw it away.

    A first optimizer step imports torch._dynamo; a first error, anomaly mode, the diagnoser
    and the measuring hooks import and set up their own parts. Done here, each fork starts
    with them loaded, as the second of several scenarios in one interpreter would, and from
    a state no scenario has touched.
    """
    job = {"id": "warm-up", "file": "<warm-up>", "source": WARM_UP}
    with contextlib.redirect_stdout(io.StringIO()):
        run_job(job)
        run_loop(dict(job, id="loop warm-up"))
    linecache.cache.pop(job["file"], None)


def runs_early(job):
    """Whether a job can run before the warm-up: its text names no optimizer.

    The warm-up's first optimizer step imports torch._dynamo, most of the warm-up's time, on one
    core while the others wait; a job that steps no optimizer needs none of it. A job this
    guesses wrong about imports it in its own fork: slower, never different.
    """
    return "optim" not in job["source"]


class Early:
    """A fork made before the warm-up, from the state just after `import torch`, that runs the
    jobs that step no optimizer one at a time, each in a fork of its own as the server would,
    while the server warms up on another core.

    It appends each job's "start" and "done" to a file, one line each, which the server reads
    as they come once it has warmed up, so that a job that ended is reported, and a job's
    timeout runs, while a later one still runs; a job that started during the warm-up has its
    timeout counted from the warm-up's end. It kills what its jobs left, as the server does.
    """

    def __init__(self, jobs, numbers, repro, channel):
        self.numbers = numbers
        self.ids = {jobs[number]["id"]: number for number in numbers}
        self.reports = tempfile.TemporaryFile()
        self.used = 0  # bytes of the file take() has turned into reports
        self.read = b""  # bytes after those that take() has read: the start of a line
        self.reported = set()  # numbers the server has a "done" for
        self.pid = os.fork()
        if self.pid == 0:
            run_fork(lambda: self.serve(jobs, repro, channel))

    def serve(self, jobs, repro, channel):
        """In the fork, through run_fork(): run the early jobs, a report line per event."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, channel)  # only the server speaks on the channel
        os.close(devnull)
        import gc

        gc.enable()  # as every job has it: the server switched it off to import torch
        gc.freeze()

        def record(message):  # one write per line: the server never reads half a line
            line = json.dumps(message, sort_keys=True) + "\n"
            os.write(self.reports.fileno(), line.encode("ascii"))

        serve([jobs[number] for number in self.numbers], repro, record, channel, 1)

    def take(self):
        """The (event, job number, message) of each whole line written since the last call."""
        offset = self.used + len(self.read)
        size = os.fstat(self.reports.fileno()).st_size
        if size > offset:
            self.read += os.pread(self.reports.fileno(), size - offset, offset)
        whole, _, rest = self.read.rpartition(b"\n")
        if not whole:
            return []
        self.used += len(whole) + 1
        self.read = rest
        found = []
        for line in whole.decode("ascii").splitlines():
            message = json.loads(line)
            found.append((message.pop("event"), self.ids[message.pop("id")], message))
        return found

    def finish(self, status):
        """The reports not yet taken; each job it did not report done crashed with it."""
        try:
            found = self.take()
        finally:
            self.reports.close()
        if os.WIFSIGNALED(status):
            how = f"was killed by signal {os.WTERMSIG(status)}"
        else:
            how = f"exited with code {os.WEXITSTATUS(status)}"
        done = {number for event, number, _ in found if event == "done"}
        for number in self.numbers:
            if number not in done and number not in self.reported:
                crashed = {"how": "ran in a fork that " + how, "last": ""}
                found.append(("done", number, {"crashed": crashed}))
        return found


MADV_COLLAPSE = 25  # linux/mman.h, Linux 6.1 and later
HUGE_PAGE = 2 << 20


def _collapsible():
    """madvise, and the (start, end) of each run of whole huge pages in this process's
    anonymous memory; no regions where ctypes or /proc cannot say."""
    try:
        import ctypes

        madvise = ctypes.CDLL(None).madvise
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        with open("/proc/self/maps") as handle:
            maps = handle.read().splitlines()
    except (OSError, AttributeError):
        return None, []
    regions = []
    for line in maps:
        fields = line.split()
        if fields[1] != "rw-p" or fields[5:] not in ([], ["[heap]"]):
            continue
        low, high = (int(bound, 16) for bound in fields[0].split("-"))
        start, end = -(-low // HUGE_PAGE) * HUGE_PAGE, high // HUGE_PAGE * HUGE_PAGE
        if end > start:
            regions.append((start, end))
    return madvise, regions


def collapse_memory():
    """Back this process's anonymous memory with huge pages where Linux can (MADV_COLLAPSE):
    a fork then copies one page table entry per 2 MiB instead of 512, and its end frees as
    few. Memory, and so every job's outcome, stays as it was; where Linux cannot, nothing.
    One system call per region (ctypes lets go of the GIL in each): from a thread, the
    interpreter's other thread is held up as little as can be."""
    madvise, regions = _collapsible()
    for start, end in regions:
        madvise(start, end - start, MADV_COLLAPSE)  # EINVAL before Linux 6.1: no matter


def collapse_steps():
    """collapse_memory() one huge page at a time, yielding after each: a few milliseconds of
    work apiece at most, which the server does while it would otherwise wait for its jobs."""
    madvise, regions = _collapsible()
    for start, end in regions:
        for page in range(start, end, HUGE_PAGE):
            madvise(page, HUGE_PAGE, MADV_COLLAPSE)
            yield True


def serve(jobs, repro, send, channel, parallel, early=None, idle=None):
    """Run each job in a fork of this process, `parallel` at a time; report them in order.

    `idle`, if given, is an iterator of short steps of work for this process that make the
    later forks cheaper (collapse_steps()): one step is done each time no job has ended, in
    place of waiting, so that the jobs keep every core busy meanwhile. `early`, if given, is an
    Early fork already at work on some of the jobs; its reports are read every few
    milliseconds. It takes none of the `parallel` places: it is near its end by the time the
    server is warm.

    A job kills what it started before it ends; what a job that crashed left behind comes back
    to this process (a subreaper) and is killed as soon as the job has ended.
    """
    running, ended = {}, {}
    queued = list(range(len(jobs)))
    early_pid = None if early is None else early.pid
    if early is not None:
        running[early.pid] = (None, early)
        queued = [number for number in queued if number not in early.ids.values()]

    def from_early(found):
        for event, number, message in found:
            if event == "start":
                send({"event": "start", "id": jobs[number]["id"]})
            else:
                ended[number] = message
                early.reported.add(number)

    spare = Spare(jobs, repro, channel)
    started = reported = 0
    while reported < len(jobs):
        while started < len(queued) and len(running) - (early_pid in running) < parallel:
            number = queued[started]
            # "start" goes out before the fork is told: a job that kills this process at once
            # is then named among those under way.
            send({"event": "start", "id": jobs[number]["id"]})
            spare.start(number)
            running[spare.pid] = (number, spare)
            spare = Spare(jobs, repro, channel)
            started += 1
        early_runs = early is not None and early.pid in running
        if early_runs:
            from_early(early.take())
        pid, status = CHILDREN.poll()
        if pid is None:
            if idle is not None and next(idle, None) is None:
                idle = None  # the work is done
            if idle is None:
                if early_runs:
                    time.sleep(0.002)
                else:
                    pid, status = CHILDREN.wait()
        if pid in running:
            number, fork = running.pop(pid)
            if number is None:
                from_early(fork.finish(status))
            else:
                ended[number] = fork.finish(status)
        if pid is not None:
            CHILDREN.kill_all_but([spare.pid, *running])  # orphans of a job that died
        while reported in ended:
            done = {"event": "done", "id": jobs[reported]["id"]}
            done.update(ended.pop(reported))
            send(done)
            reported += 1
    spare.dismiss(CHILDREN)


def main():
    """Serve one request: import torch once, then run every job in its own fork."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_server)
    die_with_parent(signal.SIGTERM)  # the build died: clean up as for SIGTERM
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    channel_fd = int(sys.argv[1])

    # The request comes on stdin in two lines, the second once "ready" is sent; a job's stdin
    # is /dev/null, and its fork closes this descriptor, so no job can read the build's lines.
    _REQUEST.append(os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    channel = os.fdopen(channel_fd, "w")

    def send(message):
        channel.write(json.dumps(message, sort_keys=True) + "\n")
        channel.flush()

    import gc

    # Importing torch and torch._dynamo makes hundreds of thousands of objects and almost no
    # garbage; the cyclic collector, run again and again over all of them, would take a third
    # of the import. It is switched back on, as every interpreter has it, before any job runs.
    gc.disable()
    variables = variables_digest(os.environ)  # as the build started it, before the pins
    os.environ.update(PINNED_KERNELS)
    import torch

    torch.set_num_threads(1)  # before any op: no intra-op pool to break in the forks
    # The build started this process first and wrote the request meanwhile; no request is a
    # build that stopped before it had one (its output folder, or repro/, was wrong).
    line = read_line(_REQUEST[0])
    if not line.strip():
        return 0
    request = json.loads(line)
    repro = request["repro"]
    sys.path.insert(0, repro)
    for name, module in sorted(request.get("modules", {}).items()):
        install_module(name, module["file"], module["source"])
    jobs = request["jobs"]
    parallel = max(1, min(4, os.cpu_count() or 1))  # each job: one thread, its own process
    probe = Probe()
    early = None
    if parallel > 1:  # on one core the early jobs would only slow the warm-up down
        numbers = [number for number, job in enumerate(jobs) if runs_early(job)]
        early = Early(jobs, numbers, repro, channel_fd) if numbers else None
    # What `import torch` left gets its huge pages now, from a thread on another core while the
    # warm-up runs; what the warm-up adds, a huge page at a time while the first jobs run. The
    # thread ends before anything forks again.
    collapsing = threading.Thread(target=collapse_memory)
    collapsing.start()
    warm_up()
    collapsing.join()
    ready = probe.result(CHILDREN)
    if ready.pop("no_accelerator"):
        _CPU_ONLY.append(True)
    ready["variables"] = variables
    send({"event": "ready", "environment": ready})
    more = read_line(_REQUEST[0])  # the jobs the build chose on reading the environment
    os.close(_REQUEST.pop())
    if more.strip():
        jobs.extend(json.loads(more)["jobs"])
    gc.enable()
    gc.freeze()  # the forks share these objects' pages instead of copying them
    serve(jobs, repro, send, channel_fd, parallel, early, collapse_steps())
    return 0


if __name__ == "__main__":
    sys.exit(main())
