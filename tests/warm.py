"""A warm interpreter: `python ARGS` in a fork of a process that has imported torch once.

A fresh `python train.py` here spends about 2 CPU s importing torch and 1 s tearing it down
again; the tests that run a script plainly and under the diagnoser and compare the two did
that twice a test. `run(args, cwd, env, timeout)` does what `subprocess.run([sys.executable,
*args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)` does, in a child
forked from a server started once per test process (one per xdist worker) that has imported
torch, torch._dynamo (the first optimizer step imports it) and numpy, and nothing of this
project. The child does what CPython's main does with ARGS (`FILE`, `DIR` or `-m MODULE`,
then its arguments; `-m backtwice.diagnose ...` is the diagnoser's command line as a reader
types it): it sets sys.argv, sys.path[0], the working folder and the environment, runs the
code as `__main__` (a file in a fresh `__main__` module; a folder and `-m` through
`runpy._run_module_as_main`, as CPython does), prints an uncaught exception through
sys.excepthook without this file's frames, and ends as Python's finalization would: the
status from SystemExit (its text on stderr), 1 after a traceback, the script's threads
joined, atexit's functions run, `__main__`'s globals dropped and collected (so their files
flush), stdout and stderr flushed (120 when stdout fails), killed by SIGINT after an uncaught
KeyboardInterrupt. It then leaves with os._exit, without tearing torch's modules down.

What a fork differs in, and so is not used for (those tests start real processes): which
modules are already imported (torch's own import runs under no diagnoser), state a script
leaves in torch's or another preloaded module's objects at exit, the interpreter's start-up
settings (so an environment whose PYTHON*, OMP_*, MKL_*, TORCH* or locale variables differ
from the server's starts a fresh process instead), `sys.orig_argv`, resource limits and
umasks set for a child. tests/test_warm.py runs scripts both ways and checks they agree.
"""

import atexit
import builtins
import contextlib
import gc
import io
import json
import locale
import os
import select
import subprocess
import sys
import tempfile
import threading
import types

HERE = os.path.abspath(__file__)
# The files whose frames an uncaught exception's traceback leaves out, as Python's main has
# none of its own (tests/warm_capture.py adds itself).
OWN_FILES = {HERE, "<string>"}
# Read by the interpreter, torch or OpenMP as they start, not as the script runs.
STARTUP = ("PYTHON", "OMP_", "MKL_", "KMP_", "OPENBLAS", "TORCH", "LC_", "LANG", "LD_")
WRITERS = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
PRELOAD = ("numpy", "torch", "torch._dynamo", "torch.nn", "torch.optim")
# The server: this file loaded as a module (not `__main__`, which a `-m` run's code fills) and
# nothing added to sys.path.
LAUNCH = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('_warm', sys.argv[1])\n"
    "module = sys.modules['_warm'] = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "module.serve(int(sys.argv[2]), int(sys.argv[3]))\n"
)

# ---- the client, in the test process ---------------------------------------------------------


def startup(env):
    """The variables of env that a fresh interpreter reads as it starts."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(STARTUP)))


class Server:
    """One warm interpreter; `run` forks a child of it per command."""

    def __init__(self, env):
        self.key = startup(env)
        self.folder = tempfile.mkdtemp(prefix="warm-")
        requests_r, self.requests = os.pipe()
        self.replies, replies_w = os.pipe()
        self.log = open(os.path.join(self.folder, "server.log"), "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, HERE, str(requests_r), str(replies_w)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            pass_fds=(requests_r, replies_w),
        )
        os.close(requests_r)
        os.close(replies_w)
        self.pending = b""
        self.count = 0
        self.cpu = 0.0  # CPU seconds its children took, for bench/ and docs/testing.md

    def reply(self, deadline):
        """The server's next line, as JSON; None once deadline (a time.monotonic) passes."""
        import time

        while b"\n" not in self.pending:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if not select.select([self.replies], [], [], left)[0]:
                return None
            data = os.read(self.replies, 65536)
            if not data:
                self.process.wait()
                with open(self.log.name, encoding="utf-8", errors="replace") as handle:
                    raise RuntimeError("the warm interpreter ended:\n" + handle.read())
            self.pending += data
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, args, cwd, env, timeout):
        import time

        self.count += 1
        out = os.path.join(self.folder, f"{self.count}.out")
        err = os.path.join(self.folder, f"{self.count}.err")
        request = {"args": list(args), "cwd": str(cwd), "env": env, "out": out, "err": err}
        os.write(self.requests, json.dumps(request).encode() + b"\n")
        deadline = None if timeout is None else time.monotonic() + timeout
        pid = self.reply(None)["pid"]
        done = self.reply(deadline)
        if done is None:
            os.kill(pid, 9)
            self.reply(None)
            raise subprocess.TimeoutExpired([sys.executable, *args], timeout)
        texts = []
        for path in (out, err):
            with open(path, "rb") as handle:
                texts.append(decoded(handle.read()))
            os.unlink(path)
        code = os.waitstatus_to_exitcode(done["status"])
        self.cpu += done["cpu"]
        return subprocess.CompletedProcess([sys.executable, *args], code, *texts)

    def close(self):
        os.close(self.requests)
        self.process.wait(timeout=60)
        os.close(self.replies)
        self.log.close()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


def decoded(data):
    """Bytes as subprocess.run(text=True) gives them: the locale's encoding, \\n newlines."""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


SERVERS = {}
# At most this many warm interpreters a test process (one per set of start-up variables: the
# diagnoser tests' environment, and the test process's own); others start a fresh process.
MOST = 2
# Set for a test marked `fresh` (tests/conftest.py): its commands start new interpreters.
FRESH = False


def run(args, cwd, env=None, timeout=None):
    """`python ARGS` in cwd with env (None: this process's), as subprocess.run(...,
    capture_output=True, text=True, timeout=timeout) returns it; in a fork of a warm
    interpreter, or in a fresh process under FRESH or where no warm one may start for env."""
    env = dict(os.environ if env is None else env)
    key = startup(env)
    if FRESH or key not in SERVERS and len(SERVERS) >= MOST:
        return fresh(args, cwd, env, timeout)
    if key not in SERVERS:
        SERVERS[key] = Server(env)
    return SERVERS[key].run(args, cwd, env, timeout)


def fresh(args, cwd, env, timeout):
    """`python ARGS` in a new interpreter, what run() stands for."""
    command = [sys.executable, *args]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def close():
    """End the warm interpreters this process started."""
    while SERVERS:
        SERVERS.popitem()[1].close()


# ---- the server and its children -------------------------------------------------------------


def serve(requests, replies):
    """Read a request a line, fork a child for it, say its pid and then its wait status."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    preloaded = set(sys.modules)
    gc.freeze()  # the children neither collect nor copy what the server made
    pending = b""
    while True:
        while b"\n" not in pending:
            data = os.read(requests, 65536)
            if not data:
                os._exit(0)
            pending += data
        line, pending = pending.split(b"\n", 1)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                os.close(requests)
                os.close(replies)
                child(request, preloaded)
            finally:
                os._exit(70)
        os.write(replies, json.dumps({"pid": pid}).encode() + b"\n")
        status, usage = os.wait4(pid, 0)[1:]
        cpu = usage.ru_utime + usage.ru_stime
        os.write(replies, json.dumps({"status": status, "cpu": cpu}).encode() + b"\n")


def child(request, preloaded):
    """Become `python ARGS` in the request's folder and environment; never returns."""
    end = os._exit  # the script may replace os._exit (the diagnoser does)
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    become(request["args"], request["cwd"], request["env"], preloaded, end)


def become(args, cwd, env, preloaded, end):
    """In a fork whose descriptors are set: run `python ARGS` in cwd with env, as CPython's
    main would, and leave through `end` (os._exit, taken before the script could replace it)."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    fresh_main()
    if "numpy.random" in sys.modules:  # random reseeds itself after a fork; numpy does not
        sys.modules["numpy.random"].seed()
    status, interrupted = 0, False
    try:
        start(args)()
    except SystemExit as exc:
        status = exit_status(exc.code)
    except BaseException as exc:  # noqa: BLE001 - printed as Python's main prints it
        status, interrupted = 1, isinstance(exc, KeyboardInterrupt)
        uncaught(exc)
    finish(status, interrupted, end, preloaded)


def fresh_main():
    """An empty `__main__`, as the interpreter makes before it runs anything."""
    from importlib.machinery import BuiltinImporter

    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=builtins, __loader__=BuiltinImporter, __annotations__={})
    sys.modules["__main__"] = main


def start(args):
    """Set sys.argv and sys.path[0] as CPython's main does for ARGS; return what runs them."""
    import runpy

    if args[0] == "-m":
        sys.argv = ["-m", *args[2:]]
        sys.path[0] = os.getcwd()
        return lambda: runpy._run_module_as_main(args[1], alter_argv=True)
    given = args[0]
    full = given if os.path.isabs(given) else os.path.join(os.getcwd(), given)
    sys.argv = list(args)
    if os.path.isdir(given):
        sys.path[0] = full
        return lambda: runpy._run_module_as_main("__main__", alter_argv=False)
    sys.path[0] = os.path.dirname(os.path.realpath(given))
    return lambda: run_file(full)


def run_file(path):
    """Run a script file as `python FILE` does, in a fresh `__main__`."""
    from importlib.machinery import SourceFileLoader

    try:
        with open(path, "rb") as handle:
            source = handle.read()
    except OSError as exc:
        sys.stderr.write(
            f"{sys.executable}: can't open file {path!r}: [Errno {exc.errno}] {exc.strerror}\n"
        )
        raise SystemExit(2) from None
    main = sys.modules["__main__"]
    main.__dict__.update(
        __file__=path,
        __cached__=None,
        __builtins__=builtins,
        __loader__=SourceFileLoader("__main__", path),
    )
    code = compile(source, path, "exec", dont_inherit=True)
    exec(code, main.__dict__)


def exit_status(code):
    """The status SystemExit(code) ends Python with; a text is printed to stderr."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    with contextlib.suppress(Exception):  # Python's main ignores it too
        sys.stderr.write(str(code) + "\n")
    return 1


def uncaught(exc):
    """Print an exception as Python's main does, without this file's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in OWN_FILES:
        tb = tb.tb_next
    exc.__traceback__ = tb
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    sys.excepthook(type(exc), exc, tb)


def finish(status, interrupted, end, preloaded):
    """What Python's finalization does that a script or a reader sees; then leave."""
    threading._shutdown()
    atexit._run_exitfuncs()
    # Files the script left open are flushed as their objects are freed at the end (freed
    # here in a cycle, a buffer may go before its text layer, which then loses its text).
    for found in gc.get_objects():
        kind = type(found)  # not isinstance: that reads __class__, which some objects warn on
        if issubclass(kind, WRITERS) and found is not sys.stdout and found is not sys.stderr:
            with contextlib.suppress(Exception):
                if not found.closed and found.writable():
                    found.flush()
    # As finalization clears the modules: here those the run imported, and `__main__`.
    for name in reversed(list(sys.modules)):
        module = sys.modules[name]
        if (name not in preloaded or name == "__main__") and isinstance(module, types.ModuleType):
            names = vars(module)
            for key in list(names):
                if key != "__builtins__":
                    names[key] = None
    gc.collect()
    for stream in (sys.stderr, sys.stdout):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - Python ends with 120 when stdout fails
            status = 120 if stream is sys.stdout else status
    if interrupted:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    end(status & 0xFF)
