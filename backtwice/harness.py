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

import io
import json
import os
import platform
import random
import re
import sys
import traceback
import warnings

SEED = 0
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


def execute(job, anomaly):
    """Run one job's source in a fresh namespace with a fixed seed; return what happened."""
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
    error = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.set_detect_anomaly(anomaly):
                exec(code, namespace)
        except Exception as exc:  # the scenario's own exception is the result
            error = exc
    return printed, error, caught


def run_job(job):
    """Run a job plainly, and again under anomaly mode when it raised."""
    lines = job["source"].splitlines()
    try:
        printed, error, _ = execute(job, anomaly=False)
    except TooMuchOutput as exc:
        return {"too_much_output": str(exc)}
    result = {"outputs": printed, "raised": None, "anomaly": None}
    if error is not None:
        result["raised"] = describe_exception(error, job["file"], lines)
        _, _, caught = execute(job, anomaly=True)
        result["anomaly"] = describe_anomaly(caught, job["file"], lines)
    return result


def install_module(name, filename, source):
    """Make `import name` give this source text, the one the snapshot hashed, not a reread file."""
    import types

    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)


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
        send({"event": "done", "id": job["id"], "result": run_job(job)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
