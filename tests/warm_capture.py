"""A warm capture interpreter: `python harness.py CHANNEL_FD` in a fork of a process that has
imported torch once.

A capture starts its interpreter, which spends about 3.5 CPU s importing torch and
torch._dynamo before it runs a job; the build and capture tests started some 80 of them, most
to run a handful of short scenarios. Here the interpreter a test's capture starts is a shim
(`python()` names it): a Python started with -I -S, without torch, that connects to a server
over a Unix socket, hands it its stdin, stdout, stderr and the channel descriptor (SCM_RIGHTS)
with its arguments, working folder and environment, and waits. The server, started once per
test process, has set the harness's kernel pins, imported torch, torch._dynamo and numpy, and
run the harness's warm-up once; it forks a child that becomes `python harness.py CHANNEL_FD`
as tests/warm.py's children become `python ARGS` (a fresh `__main__`, the script's exit as
Python's), in a session of its own. The shim forwards SIGTERM, SIGHUP and SIGINT to that child
and ends as it ended (its exit status, or killed by the same signal). A shim that dies
(SIGKILL) closes its socket, and the server then stops the child with SIGTERM, as a build that
died would stop its harness.

So a build given `--python SHIM`, or a capture whose Child would start sys.executable, runs
the real harness from its file, in its real order (request, modules, probe, early jobs,
warm-up, jobs in forks), and gives the same snapshot; only the warm-up it runs again is cheap
now. A capture took 0.6-0.8 s and 0.8 CPU s this way, against 4-5 s and 4.3 CPU s.

What differs, and is left to real interpreters (tests marked `fresh`): what is imported before
the harness runs (an early job finds torch._dynamo imported), the process tree (the harness
is not the build's descendant: the kill and signal tests start their builds themselves), the
interpreter's own start-up failures (those tests name their own --python), and an environment
whose start-up variables differ from the session's (the shim then execs the real interpreter;
WARM_CAPTURE_LOG=FILE collects those commands and the variables that differed).
"""

import array
import contextlib
import importlib.util
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile

if __package__:
    from . import warm
else:  # the server, started by LAUNCH, which loads warm.py first
    warm = sys.modules["_warm"]

HERE = os.path.abspath(__file__)
warm.OWN_FILES.add(HERE)
HARNESS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "backtwice", "harness.py")
# What the harness or torch reads as they start: warm.py's list and the harness's own
# variables (a build that sets any of them differently gets a real interpreter).
PREFIXES = (*warm.STARTUP, "PYTORCH", "ATEN_", "ONEDNN_", "DNNL_", "CUDA", "CUBLAS")
# But this one, which importing torch._dynamo sets in the test process for itself.
OWN = ("TORCHINDUCTOR_CACHE_DIR",)
# The environment the server starts with: the test session's, as conftest.py's
# pytest_configure left it (a test's monkeypatched variables are not the server's).
BASE = {}
LAUNCH = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('_warm', sys.argv[4])\n"
    "module = sys.modules['_warm'] = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "spec = importlib.util.spec_from_file_location('_warm_capture', sys.argv[1])\n"
    "module = sys.modules['_warm_capture'] = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "module.serve(sys.argv[2], int(sys.argv[3]))\n"
)
SHIM = """#!{python} -IS
import array, json, os, signal, socket, sys
KEY, PREFIXES, OWN, PATH, REAL, LOG = {key!r}, {prefixes!r}, {own!r}, {path!r}, {real!r}, {log!r}
args = sys.argv[1:]
key = sorted([k, v] for k, v in os.environ.items() if k.startswith(PREFIXES) and k not in OWN)
conn = None
if key == KEY and len(args) == 2 and args[1].isdigit():
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(PATH)
    except OSError:
        conn = None
if conn is None:
    with open(LOG, "a") as log:
        log.write(json.dumps([args, [kv for kv in key if kv not in KEY], [kv for kv in KEY if kv not in key]]) + "\\n")
    os.execv(REAL, [REAL, *args])
channel = int(args[1])
ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # as a new interpreter would find it
request = {{"args": args, "cwd": os.getcwd(), "env": dict(os.environ), "sigint_ignored": ignored}}
fds = array.array("i", [0, 1, 2, channel])
conn.sendmsg([json.dumps(request).encode() + b"\\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
for fd in (0, channel):
    os.close(fd)
reader = conn.makefile("rb")
pid = json.loads(reader.readline())["pid"]
for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(signum, lambda signum, frame: os.kill(pid, signum))
line = reader.readline()
status = json.loads(line)["status"] if line else 128 + signal.SIGKILL
if os.WIFSIGNALED(status):
    if os.WTERMSIG(status) != signal.SIGKILL:
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
os._exit(os.waitstatus_to_exitcode(status))
"""


def key(env):
    """The variables of env that the harness or torch read as they start, as the shim lists
    them."""
    return sorted([k, v] for k, v in env.items() if k.startswith(PREFIXES) and k not in OWN)


# ---- the client, in the test process ---------------------------------------------------------


class Server:
    """One warm capture interpreter and the shim that reaches it."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="warm-capture-")
        self.path = os.path.join(self.folder, "socket")
        self.shim = os.path.join(self.folder, "python")
        ready_r, ready_w = os.pipe()
        self.log = open(os.path.join(self.folder, "server.log"), "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, HERE, self.path, str(ready_w), warm.HERE],
            env=BASE or None,
            stdin=subprocess.PIPE,  # its end ends the server
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            pass_fds=(ready_w,),
        )
        os.close(ready_w)
        with os.fdopen(ready_r, "rb") as ready:
            if ready.read() != b"ready":
                self.process.wait()
                with open(self.log.name, encoding="utf-8", errors="replace") as handle:
                    raise RuntimeError("the warm capture interpreter ended:\n" + handle.read())
        text = SHIM.format(
            python=sys.executable,
            key=key(BASE or os.environ),
            prefixes=PREFIXES,
            own=OWN,
            path=self.path,
            real=sys.executable,
            log=os.path.join(self.folder, "real.log"),
        )
        with open(self.shim, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(self.shim, os.stat(self.shim).st_mode | stat.S_IXUSR)

    def close(self):
        fallbacks = os.path.join(self.folder, "real.log")
        if os.environ.get("WARM_CAPTURE_LOG") and os.path.exists(fallbacks):
            with open(fallbacks, "rb") as found, open(os.environ["WARM_CAPTURE_LOG"], "ab") as log:
                log.write(found.read())
        self.process.stdin.close()
        self.process.wait(timeout=60)
        self.log.close()
        for name in os.listdir(self.folder):
            os.unlink(os.path.join(self.folder, name))
        os.rmdir(self.folder)


SERVER = []


def python():
    """The interpreter a test's capture should start: the shim, or sys.executable in a test
    marked `fresh` (warm.FRESH) or in a session run with WARM_CAPTURE=0."""
    off = warm.FRESH or os.environ.get("WARM_CAPTURE") == "0"
    return sys.executable if off else shim()


def shim():
    """The shim of this process's warm capture interpreter, started now if need be."""
    if not SERVER:
        SERVER.append(Server())
    return SERVER[0].shim


def servers():
    """The pids of this process's warm interpreters, of both kinds: a test that looks for the
    processes a build left behind leaves these out."""
    kept = [*SERVER, *warm.SERVERS.values()]
    return {server.process.pid for server in kept}


def close():
    """End this process's warm capture interpreter."""
    while SERVER:
        SERVER.pop().close()


# ---- the server and its children -------------------------------------------------------------


def serve(path, ready):
    """Warm up as the harness does, then fork a child per connection until stdin ends."""
    harness = load_harness()
    os.environ.update(harness.PINNED_KERNELS)  # read as torch and its kernels start
    import importlib

    for name in warm.PRELOAD:
        importlib.import_module(name)
    import torch

    torch.set_num_threads(1)
    harness.warm_up()
    harness.collapse_memory()
    for name in harness.PINNED_KERNELS:
        del os.environ[name]
    preloaded = set(sys.modules)
    gc_freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    os.write(ready, b"ready")
    os.close(ready)
    running = {}  # connection -> the child's pid
    stopped = set()  # the connections whose shim died, their child told to stop
    while True:
        watched = [sys.stdin, listener, *(c for c in running if c not in stopped)]
        readable = select.select(watched, [], [], 0.05)[0]
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1):
            for pid in running.values():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            os._exit(0)
        if listener in readable:
            conn = listener.accept()[0]
            pid = start(conn, listener, running, preloaded)
            if pid is None:  # the shim ended before it asked
                conn.close()
            else:
                running[conn] = pid
        for conn in [c for c in readable if c in running and c not in stopped]:
            if not conn.recv(1):  # the shim died: stop its child, as a build's death would
                stopped.add(conn)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(running[conn], signal.SIGTERM)
        for conn, pid in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"status": status}).encode() + b"\n")
                conn.close()
                del running[conn]
                stopped.discard(conn)


def load_harness():
    """The harness as a module of its own, for its pins and warm-up (the children run it from
    its file again, as `__main__`)."""
    spec = importlib.util.spec_from_file_location("_warm_harness", HARNESS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gc_freeze():
    import gc

    gc.collect()
    gc.freeze()  # the children neither collect nor copy what the server made


def start(conn, listener, running, preloaded):
    """Read the shim's request and descriptors, fork its child; return the child's pid (None
    for a shim that ended first)."""
    fds = array.array("i")
    data = b""
    while not data.endswith(b"\n"):
        chunk, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(4 * fds.itemsize))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not chunk:
            break
        data += chunk
    if not data.endswith(b"\n"):
        for fd in fds:
            os.close(fd)
        return None
    request = json.loads(data)
    pid = os.fork()
    if pid == 0:
        try:
            listener.close()
            for other in running:
                other.close()
            conn.close()
            child(request, list(fds), preloaded)
        finally:
            os._exit(70)
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(OSError):  # a shim that died: its end of file stops the child
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    return pid


def child(request, fds, preloaded):
    """Become `python harness.py CHANNEL_FD` with the shim's descriptors; never returns."""
    end = os._exit  # the script may replace os._exit (the diagnoser does)
    os.setsid()  # the harness runs in a session of its own, as the build starts it
    # SIGINT as a new interpreter sets it up: ignored if its parent left it ignored (an xdist
    # worker does), else KeyboardInterrupt; the server's own may be either.
    ignored = request["sigint_ignored"]
    signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else signal.default_int_handler)
    stdin, stdout, stderr, channel = fds
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
    args = list(request["args"])
    if channel != int(args[1]):
        os.dup2(channel, int(args[1]))
        os.close(channel)
    for fd in (stdin, stdout, stderr):
        if fd not in (0, 1, 2, int(args[1])):
            os.close(fd)
    os.set_inheritable(int(args[1]), True)  # as subprocess's pass_fds leaves it
    warm.become(args, request["cwd"], request["env"], preloaded, end)
