"""Say which backward call freed what a later one needed, where it was built, and the fix.

    python -m backtwice.diagnose [--json FILE] SCRIPT [ARGS...]
    python diagnose.py [--json FILE] SCRIPT [ARGS...]      (this file copied next to a script)
    with diagnose(): ...                                    (around a training loop)

SCRIPT runs as __main__ with its arguments, as `python SCRIPT ARGS` would: its output and exit
status are its own, this tool's words go to stderr. While it runs, every backward and
torch.autograd.grad call is recorded (a code object and a line per frame), and every saved tensor
notes the reader's line that saved it and, when released, the call that released it. When
"Trying to backward through the graph a second time" fires, the graph is walked once to name the
call that raised, the call that freed what it needed, the node and its forward line, the cause
and the fix; the report goes to stderr and onto the exception as a note, and the exception goes
on as before. --json FILE writes the same report (also after a clean run).

Only the standard library and torch; Python 3.8 and later, torch 2.0 and later.
"""

import contextlib
import functools
import json
import linecache
import os
import re
import runpy
import subprocess
import sys
import sysconfig
import tempfile
import threading
import types
import weakref

import torch

BACKWARD_TWICE = "Trying to backward through the graph a second time"
ISSUE_13494 = "pytorch/pytorch#13494"
PREFIX = "backtwice.diagnose: "
FREED = "backtwice.freed"  # node.metadata key: (freeing call, code, line, clock) of what it saved
WALKED = "backtwice.walked"  # node.metadata key: the non-retaining call that last went through it
WALK_LIMIT = 2000  # nodes visited per call when looking for double traversals
SEARCH_LIMIT = 200000  # nodes visited once the error fires
TRANSFORMS = ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap")

# The page's checker answers for each cause, as the URL fragment that selects them; the reader
# picks what the run cannot tell (which kind of carried state, two losses or a GAN). Keys are
# causes, and "shared-forward/grad" where the freeing call was torch.autograd.grad.
CHECKER = {
    "same-loss-twice": "#when=first&calls=twice&reach=nothing&retain=none",
    "carried-state": "#when=later&calls=one&retain=none",
    "shared-forward": "#when=first&reach=nothing&retain=none",
    "shared-forward/grad": "#when=first&calls=grad&reach=nothing&retain=none",
    "saved-read": "#when=saved&calls=one&reach=nothing&retain=none",
}

_HERE = os.path.normcase(os.path.abspath(__file__))
_current_node = getattr(torch._C, "_current_autograd_node", None)
_ACTIVE = None  # the running _Diagnoser, read by _Saved.__del__
_READER = {}  # code object -> whether it is the reader's code (not torch, stdlib or this file)


def _library_dirs():
    """Folders whose code is not the reader's: torch, the standard library, site-packages."""
    found = {os.path.dirname(torch.__file__), os.path.dirname(os.__file__)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            found.add(path)
    return tuple(os.path.join(os.path.normcase(os.path.abspath(p)), "") for p in found)


_LIBRARIES = _library_dirs()


def _is_reader(code):
    """Whether a code object belongs to the reader's code; cached per code object."""
    known = _READER.get(code)
    if known is None:
        name = code.co_filename
        if name.startswith("<"):
            known = not name.startswith("<frozen")
        else:
            path = os.path.normcase(os.path.abspath(name))
            known = path != _HERE and not path.startswith(_LIBRARIES)
        _READER[code] = known
    return known


def _site(frame):
    """The whole stack of the reader's frames, innermost first, as (code, line) pairs."""
    stack = []
    while frame is not None:
        if _is_reader(frame.f_code):
            stack.append((frame.f_code, frame.f_lineno))
        frame = frame.f_back
    return tuple(stack)


class _Call:
    """One backward or autograd.grad call: small facts only, formatted after an error."""

    __slots__ = ("number", "kind", "site", "retain_graph", "roots", "results", "previous")

    def __init__(self, number, kind, site, retain_graph, roots, previous):
        self.number = number
        self.kind = kind
        self.site = site
        self.retain_graph = retain_graph
        self.roots = roots
        self.results = ()
        self.previous = previous  # number of the previous call from the same site, or None


class _Saved:
    """What a pack hook keeps: the tensor, its version, and the reader's line that saved it."""

    __slots__ = ("tensor", "version", "original", "code", "line", "clock")

    def __del__(self):
        # Autograd drops this when it releases the node's saved values: note which call did.
        state = _ACTIVE
        if state is None or state.current is None or _current_node is None:
            return
        try:
            node = _current_node()
            if node is not None:
                meta = node.metadata
                if FREED not in meta:
                    meta[FREED] = (state.current, self.code, self.line, self.clock)
        except Exception:  # never let bookkeeping raise inside autograd
            pass


def _tensors(value):
    """The tensors in a tensor or a sequence of them."""
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(item for item in value if isinstance(item, torch.Tensor))
    return ()


def _is_node(value):
    """Whether value is an autograd graph node (a grad_fn, or a custom Function's ctx)."""
    return hasattr(value, "next_functions") and hasattr(value, "metadata")


def _children(node):
    """The nodes a node's gradient flows to."""
    try:
        return [child for child, _ in node.next_functions if child is not None]
    except Exception:  # a node type without edges
        return []


def _sequence(node):
    """The node's creation order (private API, guarded)."""
    try:
        return node._sequence_nr()
    except Exception:
        return -1


def _source(filename, line):
    """The stripped source line, or None."""
    text = linecache.getline(filename, line).strip() if line else ""
    return text or None


class _InplaceTemplate:
    """Torch's own wording for a saved tensor modified in place, learnt from plain torch once."""

    def __init__(self, backward):
        found = {}

        def provoke():
            # A fresh thread has no saved-tensor hooks, so torch runs its own check.
            x = torch.zeros(1, requires_grad=True)
            y = x.exp()
            found["name"] = y.grad_fn.name()
            y.add_(1)
            try:
                backward((y.sum(),))
            except RuntimeError as exc:
                found["message"] = str(exc)

        worker = threading.Thread(target=provoke)
        worker.start()
        worker.join()
        pattern = r"(.*)\[torch\.FloatTensor \[1\]\], which is output 0 of (.*), is at version 1; expected version 0 instead\.(.*)"
        match = re.fullmatch(pattern, found.get("message", ""), re.S)
        if match is None:  # unknown wording: torch 2.0's
            self.prefix = "one of the variables needed for gradient computation has been modified by an inplace operation: "
            self.hint = " Hint: enable anomaly detection to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True)."
            self.strip = False
        else:
            self.prefix, shown, self.hint = match.groups()
            self.strip = shown != found["name"]

    def message(self, tensor, version, owner):
        """Torch's message for tensor saved at version; owner is (node name, output nr) or None."""
        sizes = "[" + ", ".join(str(size) for size in tensor.shape) + "]"
        text = self.prefix + "[" + tensor.type() + " " + sizes + "]"
        if owner is not None:
            name = re.sub(r"Backward\d*$", "", owner[0]) if self.strip else owner[0]
            text += f", which is output {owner[1]} of {name},"
        text += f" is at version {tensor._version}; expected version {version} instead."
        return text + self.hint


class _Diagnoser:
    """Records calls and saved tensors while a script runs; reports once the error fires."""

    def __init__(self, script=None, shown=None):
        self.script = script  # absolute path of the script, shown as `shown`
        self.shown = shown
        self.number = 0
        self.current = None
        self.by_site = {}
        self.report = None
        self.reported = None
        self.doubles = []
        self.double_sites = set()
        self.scan = None
        self.aside = 0
        self.said_aside = False
        self.template = None
        self.hooks = None
        self.patched = []
        # The runner shows the report once, with the traceback; `with diagnose()` at once.
        self.print_at_error = script is None
        self.unprinted = None

    # ---- installing and removing -------------------------------------------------------------

    def start(self):
        """Wrap backward and grad, step aside around torch.func, install the saved-tensor hooks."""
        global _ACTIVE
        _ACTIVE = self
        self.original_backward = torch.autograd.backward
        self.original_grad = torch.autograd.grad
        self._patch(torch.autograd, "backward", self._wrap_backward(torch.autograd.backward))
        self._patch(torch.autograd, "grad", self._wrap_grad(torch.autograd.grad))
        func = getattr(torch, "func", None)
        for name in TRANSFORMS:
            if func is not None and hasattr(func, name):
                self._patch(func, name, self._aside(getattr(func, name)))
        if hasattr(torch, "vmap"):
            self._patch(torch, "vmap", self._aside(torch.vmap))
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self.hooks.__enter__()

    def _patch(self, owner, name, value):
        self.patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def stop(self):
        """Put everything back as it was."""
        global _ACTIVE
        if self.hooks is not None and self.aside == 0:
            self.hooks.__exit__(None, None, None)
        self.hooks = None
        for owner, name, value in reversed(self.patched):
            setattr(owner, name, value)
        self.patched = []
        _ACTIVE = None

    # ---- recording (cheap) ------------------------------------------------------------------

    def _pack(self, tensor):
        frame = sys._getframe(1)
        reader = _READER.get
        while frame is not None:
            known = reader(frame.f_code)
            if known is None:
                known = _is_reader(frame.f_code)
            if known:
                break
            frame = frame.f_back
        saved = _Saved()
        # A detached alias shares data and version counter; keeping the tensor itself would
        # make a reference cycle through its grad_fn when a node saves its own output.
        saved.tensor = tensor.detach()
        saved.version = tensor._version
        if tensor._is_view():
            # Torch keeps a saved view alive and names its grad_fn when it reports an in-place
            # change; a view made inside an op (a transposed weight) dies without this.
            saved.original = lambda: tensor
        else:
            saved.original = weakref.ref(tensor)
        saved.code = frame.f_code if frame is not None else None
        saved.line = frame.f_lineno if frame is not None else None
        saved.clock = self.number
        return saved

    def _unpack(self, saved):
        if self.scan is not None:
            self.scan.append(saved)
        elif saved.tensor._version != saved.version:
            # Hooks switch off torch's own check for this: raise what torch would.
            raise RuntimeError(self._inplace_message(saved))
        return saved.tensor

    def _wrap_backward(self, original):
        @functools.wraps(original)
        def backward(tensors, *args, **kwargs):
            retain = args[1] if len(args) > 1 else kwargs.get("retain_graph")
            create = args[2] if len(args) > 2 else kwargs.get("create_graph", False)
            return self._run(
                "backward", tensors, retain, create, original, (tensors,) + args, kwargs
            )

        return backward

    def _wrap_grad(self, original):
        @functools.wraps(original)
        def grad(*args, **kwargs):
            outputs = args[0] if args else kwargs.get("outputs")
            retain = args[3] if len(args) > 3 else kwargs.get("retain_graph")
            create = args[4] if len(args) > 4 else kwargs.get("create_graph", False)
            return self._run("grad", outputs, retain, create, original, args, kwargs)

        return grad

    def _run(self, kind, roots, retain, create, original, args, kwargs):
        if self.aside or _ACTIVE is not self:
            return original(*args, **kwargs)
        self.number += 1
        site = _site(sys._getframe(1))
        previous = self.by_site.get(site)
        retain_graph = bool(create) if retain is None else bool(retain)
        refs = tuple(weakref.ref(t) for t in _tensors(roots))
        call = _Call(self.number, kind, site, retain_graph, refs, previous)
        self.by_site[site] = call.number
        outer = self.current
        self.current = call
        try:
            result = original(*args, **kwargs)
        except RuntimeError as exc:
            self.current = outer
            if BACKWARD_TWICE in str(exc):
                self._on_error(exc, call)
            raise
        self.current = outer
        if kind == "grad":
            call.results = tuple(weakref.ref(t) for t in _tensors(result))
        self._walk_after(call)
        return result

    def _walk_after(self, call):
        """Mark nodes that saved nothing; a later non-retained pass through them adds twice."""
        stack = [r().grad_fn for r in call.roots if r() is not None and r().grad_fn is not None]
        seen = set()
        kept = []
        while stack and len(kept) < WALK_LIMIT:
            node = stack.pop()
            if id(node) in seen or hasattr(node, "variable"):  # AccumulateGrad: every step's
                continue
            seen.add(id(node))
            kept.append(node)
            meta = node.metadata
            freed = meta.get(FREED)
            if freed is not None:
                continue  # it saved tensors: torch itself guards it
            earlier = meta.get(WALKED)
            if earlier is not None and earlier is not call:
                self._double(earlier, call, node)
            elif call.retain_graph:
                continue
            if not call.retain_graph:
                meta[WALKED] = call
            stack.extend(_children(node))

    def _double(self, first, second, node):
        key = (first.site[:1], second.site[:1])
        if key in self.double_sites:
            return
        self.double_sites.add(key)
        entry = {"first": self._place(first), "second": self._place(second), "node": node.name()}
        self.doubles.append(entry)
        sys.stderr.write(
            PREFIX
            + "warning: call {} at {} went back through nodes that call {} at {} already went "
            "through without retain_graph; they saved no tensors, so torch did not raise, and "
            "their gradients were added again ({})\n".format(
                second.number,
                self._where(entry["second"]),
                first.number,
                self._where(entry["first"]),
                ISSUE_13494,
            )
        )

    # ---- torch.func ------------------------------------------------------------------------

    def _aside(self, transform):
        diagnoser = self

        @functools.wraps(transform)
        def transformed(*args, **kwargs):
            inner = transform(*args, **kwargs)

            @functools.wraps(inner)
            def run(*a, **k):
                diagnoser._step_aside()
                try:
                    return inner(*a, **k)
                finally:
                    diagnoser._step_back()

            return run

        return transformed

    def _step_aside(self):
        if self.aside == 0 and self.hooks is not None:
            self.hooks.__exit__(None, None, None)
            if not self.said_aside:
                self.said_aside = True
                sys.stderr.write(PREFIX + "not recording inside torch.func transforms\n")
        self.aside += 1

    def _step_back(self):
        self.aside -= 1
        if self.aside == 0 and self.hooks is not None:
            self.hooks.__enter__()

    # ---- the in-place check --------------------------------------------------------------------

    def _inplace_message(self, saved):
        if self.template is None:
            self.template = _InplaceTemplate(self.original_backward)
        return self.template.message(saved.tensor, saved.version, self._owner(saved))

    def _owner(self, saved):
        """(grad_fn name, output nr) that torch names for a saved tensor, or None for a leaf."""
        node = _current_node() if _current_node is not None else None
        if node is not None:
            for name in dir(node):
                if not name.startswith("_saved_result"):
                    continue
                self.scan = []
                with contextlib.suppress(Exception):  # a freed or non-tensor attribute
                    getattr(node, name)
                found, self.scan = self.scan, None
                if any(item is saved for item in found):
                    digits = name[len("_saved_result") :]
                    return node.name(), int(digits) if digits.isdigit() else 0
        original = saved.original()
        if original is None or original.grad_fn is None:
            return None
        return original.grad_fn.name(), original.output_nr

    # ---- after the error (formatting and graph walks) -------------------------------------

    def _on_error(self, exc, call):
        """Name the node the raising call found freed, the call that freed it, cause and fix."""
        freed = self._frontier(call)
        node, mark = max(freed, key=lambda item: _sequence(item[0])) if freed else (None, None)
        raised = self._place(call)
        self._finish(exc, raised, call, node, mark)

    def _frontier(self, call):
        """Nodes reachable from the call's roots whose saved tensors an earlier call freed."""
        stack = [r().grad_fn for r in call.roots if r() is not None and r().grad_fn is not None]
        return self._search(stack, lambda meta: meta.get(FREED, (call,))[0] is not call)

    def _search(self, stack, stop_at):
        seen = set()
        found = []
        kept = []
        while stack and len(kept) < SEARCH_LIMIT:
            node = stack.pop()
            if id(node) in seen or hasattr(node, "variable"):
                continue
            seen.add(id(node))
            kept.append(node)
            try:
                meta = node.metadata
            except Exception:
                continue
            if FREED in meta and stop_at(meta):
                found.append((node, meta[FREED]))
                continue
            stack.extend(_children(node))
        return found

    def saved_read(self, exc):
        """Report an uncaught read of a freed saved tensor (no backward call raised)."""
        if self.reported is exc or BACKWARD_TWICE not in str(exc):
            return
        frame, line = None, None
        tb = exc.__traceback__
        while tb is not None:
            if _is_reader(tb.tb_frame.f_code):
                frame, line = tb.tb_frame, tb.tb_lineno
            tb = tb.tb_next
        if frame is None:
            return
        filename = frame.f_code.co_filename
        code = _source(filename, line)
        candidates = list(self._nodes_named(frame, code or ""))
        freed = [(n, n.metadata[FREED]) for n in candidates if FREED in n.metadata]
        if not freed:
            freed = self._search(candidates, lambda meta: True)
        if not freed:
            everything = list(frame.f_locals.values()) + list(frame.f_globals.values())
            freed = self._search([n for n in map(_node_of, everything) if n], lambda meta: True)
        node, mark = max(freed, key=lambda item: _sequence(item[0])) if freed else (None, None)
        raised = {"file": self._show(filename), "line": line, "code": code, "call": None}
        self._finish(exc, raised, None, node, mark)

    def _nodes_named(self, frame, code):
        """Nodes reached by the dotted names on the line that read a saved tensor."""
        for chain in re.findall(r"[A-Za-z_][\w.]*", code):
            parts = chain.split(".")
            if parts[0] in frame.f_locals:
                value = frame.f_locals[parts[0]]
            elif parts[0] in frame.f_globals:
                value = frame.f_globals[parts[0]]
            else:
                continue
            for attr in parts[1:]:
                if attr.startswith("_saved_") or attr in ("saved_tensors", "saved_variables"):
                    break
                if not _safe_to_get(value):
                    value = None
                    break
                try:
                    value = getattr(value, attr)
                except Exception:
                    value = None
                    break
            node = _node_of(value)
            if node is not None:
                yield node

    def _finish(self, exc, raised, call, node, mark):
        freeing = mark[0] if mark else None
        cause = _cause(call, freeing, mark)
        report = {
            "torch": torch.__version__,
            "error": str(exc),
            "cause": cause,
            "raised": raised,
            "freed_by": None,
            "node": None,
            "fix": None,
            "checker": CHECKER.get(cause),
            "double_traversals": self.doubles,
        }
        if cause == "shared-forward" and freeing is not None and freeing.kind == "grad":
            report["checker"] = CHECKER["shared-forward/grad"]
        if freeing is not None:
            report["freed_by"] = self._place(freeing)
            report["freed_by"]["retain_graph"] = freeing.retain_graph
        if node is not None:
            filename = mark[1].co_filename if mark[1] is not None else None
            report["node"] = {
                "name": node.name(),
                "file": self._show(filename) if filename else None,
                "line": mark[2],
                "code": _source(filename, mark[2]) if filename else None,
            }
        if cause is not None:
            report["fix"] = self._fix(cause, report, freeing)
        self.report = report
        self.reported = exc
        text = format_report(report)
        if self.print_at_error:
            sys.stderr.write(text + "\n")
        else:
            self.unprinted = text
        if hasattr(exc, "add_note"):
            exc.add_note(text)

    def _fix(self, cause, report, freeing):
        raised = self._where(report["raised"])
        first = self._where(report["freed_by"]) if report["freed_by"] else "the earlier call"
        built = self._where(report["node"]) if report["node"] else "its forward line"
        if cause == "same-loss-twice":
            if freeing.kind == "grad":
                return (
                    f"Pass retain_graph=True to the torch.autograd.grad call at {first}, so the call at {raised}"
                    " can go through the same graph again."
                )
            return (
                f"Call backward once on this loss: remove the call at {raised} or the one at {first} (a second "
                "call would add the same gradients again)."
            )
        if cause == "carried-state":
            return (
                f"The tensor built at {built} in an earlier step is still part of this step's graph: "
                "detach what you carry across steps after each step (h = h.detach(); for an LSTM "
                f"both h and c) or compute it again inside the loop, so the call at {raised} goes back "
                "through this step only."
            )
        if cause == "shared-forward":
            if freeing is not None and freeing.kind == "grad":
                if any(ref() is not None for ref in freeing.results):
                    return (
                        f"Pass create_graph=True to the torch.autograd.grad call at {first}: the loss at"
                        f" {raised} uses its result, and create_graph=True keeps the graph and makes that"
                        " term differentiable."
                    )
                return (
                    f"Pass retain_graph=True to the torch.autograd.grad call at {first}, which otherwise"
                    f" frees the graph the call at {raised} still needs."
                )
            return (
                f"The calls at {first} and {raised} both go back through the forward pass at {built}: add the "
                "losses and call backward once, or pass retain_graph=True to the first call; if "
                "the first loss should not reach that pass (a GAN's discriminator step), detach "
                "its input there (fake.detach())."
            )
        return (
            f"Read the saved tensors before the call at {first} frees them, or keep the tensors you "
            "need in your own variables; pass retain_graph=True to that call only if you must "
            "read them after it."
        )

    # ---- places --------------------------------------------------------------------------

    def _show(self, filename):
        """A file as given on the command line (the script) or as Python reports it."""
        if self.script is not None and filename == self.script:
            return self.shown
        return filename

    def _place(self, call):
        """file, line, code and call number of a call's innermost reader frame."""
        if not call.site:
            return {"file": None, "line": None, "code": None, "call": call.number}
        code, line = call.site[0]
        return {
            "file": self._show(code.co_filename),
            "line": line,
            "code": _source(code.co_filename, line),
            "call": call.number,
        }

    @staticmethod
    def _where(place):
        return "{}:{}".format(place["file"], place["line"])

    def result(self):
        """The report: the error's, or a clean one."""
        if self.report is not None:
            return self.report
        return {
            "torch": torch.__version__,
            "error": None,
            "cause": None,
            "raised": None,
            "freed_by": None,
            "node": None,
            "fix": None,
            "checker": None,
            "double_traversals": self.doubles,
        }


def _safe_to_get(value):
    """Objects whose attributes can be read after the error without running the reader's code."""
    return isinstance(value, (torch.Tensor, type, types.ModuleType)) or _is_node(value)


def _node_of(value):
    """The graph node a value stands for: a tensor's grad_fn, or the node itself."""
    if isinstance(value, torch.Tensor):
        return value.grad_fn
    if _is_node(value):
        return value
    return None


def _cause(call, freeing, mark):
    """same-loss-twice, carried-state, shared-forward or saved-read (see the module's issue)."""
    if call is None:
        return "saved-read"
    if freeing is None:
        return None
    mine = [ref() for ref in call.roots]
    theirs = [ref() for ref in freeing.roots]
    if any(a is not None and any(a is b for b in theirs) for a in mine):
        return "same-loss-twice"
    if call.previous is not None and mark[3] < call.previous:
        return "carried-state"
    return "shared-forward"


def format_report(report):
    """The report as the lines printed to stderr."""
    lines = [PREFIX + "cause: {}".format(report["cause"])]
    raised = report["raised"]
    if raised["call"] is None:
        lines.append(
            "  raised:   a freed saved tensor was read at {}:{}".format(
                raised["file"], raised["line"]
            )
        )
    else:
        lines.append(
            "  raised:   call {} at {}:{}".format(raised["call"], raised["file"], raised["line"])
        )
    lines.append("            {}".format(raised["code"]))
    freed = report["freed_by"]
    if freed is not None:
        lines.append(
            "  freed by: call {} at {}:{} (retain_graph={})".format(
                freed["call"], freed["file"], freed["line"], freed["retain_graph"]
            )
        )
        lines.append("            {}".format(freed["code"]))
    node = report["node"]
    if node is not None:
        lines.append(
            "  node:     {}, built at {}:{}".format(node["name"], node["file"], node["line"])
        )
        lines.append("            {}".format(node["code"]))
    if report["fix"]:
        lines.append("  fix:      " + report["fix"])
    if report["checker"]:
        lines.append("  checker:  the page's " + report["checker"])
    return "\n".join(lines)


def _write_json(path, report):
    """Write the report deterministically, through a temporary file and a rename."""
    text = json.dumps(report, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".diagnose-", suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)


class diagnose:  # noqa: N801 - used as `with diagnose():`, like a function
    """Record backward calls inside the block and report the error if it fires there."""

    def __init__(self, json_path=None, script=None, shown=None):
        """`script` and `shown`: report that file under that name, and keep the report quiet
        (read it from .report); the page's capture uses this."""
        self.json_path = json_path
        self.script = script
        self.shown = shown
        self.state = None

    def __enter__(self):
        if _ACTIVE is None:
            self.state = _Diagnoser(self.script, self.shown)
            self.state.start()
        return self

    def __exit__(self, kind, exc, tb):
        if self.state is None:
            return False
        if isinstance(exc, RuntimeError):
            self.state.saved_read(exc)
        self.state.stop()
        if self.json_path:
            _write_json(self.json_path, self.state.result())
        return False

    @property
    def report(self):
        """The report so far (a clean one before any error)."""
        return self.state.result() if self.state is not None else None


def _trimmed(tb, script):
    """The traceback Python would print for the script alone: no runner, no wrappers."""
    entries = []
    started = False
    while tb is not None:
        code = tb.tb_frame.f_code
        if not started and code.co_filename == script and code.co_name == "<module>":
            started = True
        if started and os.path.normcase(os.path.abspath(code.co_filename)) != _HERE:
            entries.append(tb)
        tb = tb.tb_next
    for index in range(len(entries) - 1):
        entries[index].tb_next = entries[index + 1]
    if entries:
        entries[-1].tb_next = None
        return entries[0]
    return None


USAGE = "usage: python -m backtwice.diagnose [--json FILE] SCRIPT [ARGS...]"


def main(argv=None):
    """Run a script as __main__ under the diagnoser; return its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    json_path = None
    if args and args[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + __doc__.strip().split("\n\n", 1)[1])
        return 0
    if args and args[0] == "--json":
        if len(args) < 2:
            sys.stderr.write("--json: needs a FILE\n" + USAGE + "\n")
            return 2
        json_path, args = args[1], args[2:]
    if not args:
        sys.stderr.write(USAGE + "\n")
        return 2
    shown = args[0]
    if not os.path.isfile(shown):
        sys.stderr.write(f"{shown}: no such script, nothing was run\n")
        return 2
    # Python 3.9+ runs `python SCRIPT` with an absolute __file__; do the same.
    script = os.path.abspath(shown) if sys.version_info >= (3, 9) else shown
    sys.argv = [shown] + args[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(shown))
    state = _Diagnoser(script, shown)
    state.start()
    try:
        runpy.run_path(script, run_name="__main__")
    except (SystemExit, KeyboardInterrupt):
        _end(state, json_path)
        raise
    except BaseException as exc:
        if isinstance(exc, RuntimeError):
            state.saved_read(exc)
        _end(state, json_path, exc)
        _trim_all(exc, script)
        sys.excepthook(type(exc), exc, exc.__traceback__)
        if state.unprinted and (exc is not state.reported or not hasattr(exc, "add_note")):
            sys.stderr.write(state.unprinted + "\n")
        return 1
    _end(state, json_path)
    return 0


def _end(state, json_path, exc=None):
    """Remove the hooks, write the JSON, show a report the traceback will not carry."""
    state.stop()
    if json_path:
        _write_json(json_path, state.result())
    if exc is None and state.unprinted:
        sys.stderr.write(state.unprinted + "\n")


def _trim_all(exc, script):
    """Trim the traceback of an exception and of the ones it was raised from."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = _trimmed(exc.__traceback__, script) or exc.__traceback__
        exc = exc.__cause__ or exc.__context__


def report_for(path, argv=(), python=None, cwd=None):
    """Run a script under the diagnoser in a fresh interpreter; return its JSON report."""
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "report.json")
        command = [python or sys.executable, _HERE, "--json", out, str(path)] + list(argv)
        subprocess.run(command, cwd=cwd, capture_output=True, check=False)
        if not os.path.exists(out):
            raise RuntimeError(f"{path}: the diagnoser wrote no report")
        with open(out, encoding="utf-8") as handle:
            return json.load(handle)


if __name__ == "__main__":
    sys.exit(main())
