"""Say which backward call freed what a later one needed, where it was built, and the fix.

    python -m backtwice.diagnose [--json FILE] [--] SCRIPT|DIR [ARGS...]
    python diagnose.py [--json FILE] SCRIPT [ARGS...]      (this file copied next to a script)
    with diagnose(): ...                                    (around a training loop)
    %load_ext backtwice.diagnose                            (IPython / Jupyter, every cell)

SCRIPT runs as `python SCRIPT ARGS` would; this tool writes to stderr only. Each backward and
autograd.grad call notes the reader's frames, each saved tensor its line and the call that freed
it. When "Trying to backward through the graph a second time" fires (or the in-place error after
a retain_graph=True call), the report shows the reader's lines in source order, labelled, then
the cause and one fix. --json FILE writes it as JSON. Standard library and torch 2.0+ only.
"""

import ast
import builtins
import collections
import contextlib
import functools
import gc
import json
import linecache
import math
import os
import re
import runpy
import signal
import sys
import sysconfig
import tempfile
import threading
import time
import types
import weakref

_STARTED = time.monotonic()  # before torch's import, which each try makes again

import torch  # noqa: E402

BACKWARD_TWICE = "Trying to backward through the graph a second time"
INPLACE = "modified by an inplace operation"
ISSUE_13494 = "pytorch/pytorch#13494"
PREFIX = "backtwice.diagnose: "
FREED = "backtwice.freed"
WALKED = "backtwice.walked"
ROOT = "backtwice.root"
REGION = "backtwice.region"
KEY = "_backtwice_diagnoser"
WALK_LIMIT = 2000
# One library call that saves this many tensors (an RNN over a sequence saves hundreds) saves
# the rest without the hooks: torch checks them itself, and its outputs stand for them all.
BURST = 8
SEARCH_LIMIT = 200000
TRANSFORMS = ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap")

LATER = "#when=later&calls=one&reach={}&retain=none"
CHECKER = {
    "same-loss-twice": "#when=first&calls=twice&reach=nothing&retain=none",
    "carried-state": "#when=later&calls=one&retain=none",
    "shared-forward": "#when=first&reach=nothing&retain=none",
    "shared-forward/grad": "#when=first&calls=grad&reach=nothing&retain=none",
    "saved-read": "#when=saved&calls=one&reach=nothing&retain=none",
    "inplace-after-retain": "#retain=retain",
    **{"carried-state/" + k: LATER.format(k) for k in ("rnn", "lstm", "lstm-both", "before")},
    "carried-state/target": LATER.format("before"),
    **{"carried-state/" + k: LATER.format(k) for k in ("frozen", "total", "kept", "bank")},
    "carried-state/attr": LATER.format("bank"),
    "carried-state/slices": LATER.format("bank"),
    "carried-state/clear": LATER.format("kept"),
}

_HERE = os.path.normcase(os.path.abspath(__file__))
_Node = torch.autograd.graph.Node
_current_node = getattr(torch._C, "_current_autograd_node", None)
_top_hooks = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
_push_hooks = torch._C._autograd._push_saved_tensors_default_hooks
_pop_hooks = torch._C._autograd._pop_saved_tensors_default_hooks
_STOP = set()
_READER = {}  # id(code) -> whether it is the reader's
_KEPT = []  # ...and the code, kept so that its id stays its own
_TREES = {}
LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _active():
    return getattr(torch.autograd, KEY, None)


def _library_dirs():
    found = {os.path.dirname(torch.__file__), os.path.dirname(os.__file__)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            found.add(path)
    return tuple(os.path.join(os.path.normcase(os.path.abspath(p)), "") for p in found)


_LIBRARIES = _library_dirs()


def _invisible(function):
    """The function, its frame skipped by warnings.warn(stacklevel=...) as importlib's are: a
    warning torch gives the caller of backward (stacklevel=2) names the reader's line, as in a
    plain run, not this wrapper's."""
    code = function.__code__.replace(co_filename=_HERE + " (importlib._bootstrap)")
    function.__code__ = code
    _KEPT.append(code)
    _READER[id(code)] = False
    return function


def _is_reader(code):
    # By id: hashing code hashes its constants, a module's whole code.
    known = _READER.get(id(code))
    if known is None:
        name = code.co_filename
        if name.startswith("<"):  # a cell's code is, `python -c`'s and a spawn's are not
            known = not name.startswith("<frozen") and bool(linecache.getline(name, 1))
        else:
            path = os.path.normcase(os.path.abspath(name))
            known = path != _HERE and not path.startswith(_LIBRARIES)
            known = known and path not in _owned()
        _KEPT.append(code)
        _READER[id(code)] = known
    return known


def _frames(frame, top):
    found, known = [], _READER.get
    while frame is not None and frame is not top:
        code = frame.f_code
        if id(code) in _STOP:
            break
        reader = known(id(code))
        if reader or (reader is None and _is_reader(code)):
            found.append(frame)
        frame = frame.f_back
    return found


def _site(frame, top=None):
    return tuple((f.f_code, f.f_lineno) for f in _frames(frame, top))


def _key(site):
    return tuple((id(code), line) for code, line in site)


class _Call:
    """One backward or autograd.grad call: small facts only, formatted after an error."""

    __slots__ = ("number", "kind", "site", "retain_graph", "roots", "results", "previous")
    __slots__ += ("runs", "fresh", "seq", "under")


def _roots(call):
    return [t.grad_fn for t in (r() for r in call.roots) if t is not None and t.grad_fn]


def _children(node):
    try:
        return [child for child, _ in node.next_functions if child is not None]
    except Exception:
        return []


def _sequence(node):
    try:
        return node._sequence_nr()
    except Exception:
        return -1


def _tensors_in(value, depth=2):
    # The tensors in a value, a tuple or list of them, or such a tuple of tuples (an LSTM's).
    if isinstance(value, torch.Tensor):
        return [value]
    if depth and isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors_in(v, depth - 1)]
    return []


def _bursts_possible():
    # Nodes must give their sequence numbers (torch 2.1+) and prehooks their node.
    if _top_hooks is None or _current_node is None or not hasattr(_Node, "register_prehook"):
        return False
    with torch.enable_grad():
        probe = torch.zeros(1, requires_grad=True).exp()
    return _sequence(probe.grad_fn) >= 0


def _source(filename, line):
    text = linecache.getline(filename, line).strip() if line and filename else ""
    return text or None


def _depth(start, target, limit=3000):
    level, seen = [start], {}
    for depth in range(limit):
        if not level or len(seen) > limit:
            return None
        if any(node is target for node in level):
            return depth
        seen.update((id(n), n) for n in level)
        level = [c for n in level for c in _children(n) if id(c) not in seen]
    return None


def _within_reader(frame):
    # Whether the reader's code made this call, rather than torch's own during the outer one:
    # the first frame up the stack that is the reader's comes before the outer call's wrapper.
    while frame is not None:
        if _is_reader(frame.f_code):
            return True
        if frame.f_code.co_name == "wrapper" and frame.f_globals.get("__name__") == __name__:
            return False
        frame = frame.f_back
    return False


def _inside(node, start, limit=SEARCH_LIMIT):
    """The first nodes from `node` down that a burst after sequence number `start` made and
    whose saved tensors are gone, going no further below those."""
    stack, seen, found = [node], {}, []
    while stack and len(seen) < limit:
        node = stack.pop()
        if id(node) in seen or hasattr(node, "variable") or _sequence(node) <= start:
            continue
        seen[id(node)] = node
        if _dead(node):
            found.append(node)
        else:
            stack.extend(_children(node))
    return found


def _dead(node, why=BACKWARD_TWICE):
    # Whether reading one of the node's saved values raises that error (INPLACE: changed).
    for name in dir(node):
        if name.startswith("_saved_"):
            try:
                getattr(node, name)
            except Exception as exc:
                if why in str(exc):
                    return True
    return False


OPS = {
    "Mul": ast.Mult,
    "Div": ast.Div,
    "Add": ast.Add,
    "Sub": ast.Sub,
    "Rsub": ast.Sub,
    "Pow": ast.Pow,
}


def _constant(side):
    # 0.5, or -0.5 (a unary minus on a number, as Python parses it)
    if isinstance(side, ast.UnaryOp) and isinstance(side.op, (ast.USub, ast.UAdd)):
        side = side.operand
    return isinstance(side, ast.Constant) and isinstance(side.value, (int, float))


def _scalar_site(node, limit=64):
    """Where a node that saved only a Python number (`-0.5 * t`) ran: the mark of the nearest
    node below it that saved a tensor, and the first such operation in that mark's function at
    or after its line. None when no node below is marked or no such operation is found."""
    op = OPS.get(re.sub(r"Backward\d*$", "", node.name()))
    level, seen = _children(node), {}  # id -> node: keeps each node, and so its id, alive
    while op and level and len(seen) < limit:
        for child in level:
            seen[id(child)] = child
            mark = child.metadata.get(FREED) if isinstance(child, _Node) else None
            if not mark or mark[1] is None:
                continue
            code, start = mark[1], mark[2]
            tree = _parse(code.co_filename)
            scopes = [
                n
                for n in ast.walk(tree)
                if getattr(n, "lineno", 0) == code.co_firstlineno and hasattr(n, "body")
            ]
            end = scopes[0].end_lineno if scopes and code.co_name != "<module>" else 1 << 30
            found = [
                n.lineno
                for n in ast.walk(tree)
                if isinstance(n, ast.BinOp)
                and isinstance(n.op, op)
                and start <= n.lineno <= end
                and (_constant(n.left) or _constant(n.right))
            ]
            if found:
                return mark, min(found)
        level = [c for n in level for c in _children(n) if id(c) not in seen]
    return None


def _stored(filename, line):
    tree = _parse(filename)
    made = [
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and n.lineno == line
        for target in n.targets
        for t in ast.walk(target)
        if isinstance(t, ast.Name)
    ]
    text = "".join(linecache.getlines(filename))
    for n in ast.walk(tree):
        value = getattr(n, "value", None)
        if isinstance(n, ast.Assign) and getattr(value, "id", None) in made:
            for target in n.targets:
                if isinstance(target, ast.Attribute):
                    return ast.get_source_segment(text, target), "attr", None, 1, None
        if isinstance(n, ast.Assign) and {getattr(x, "id", None) for x in ast.walk(value)} & set(
            made
        ):
            for target in n.targets:
                if not isinstance(target, ast.Subscript):
                    continue
                name = ast.get_source_segment(text, target.value)
                index = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
                if any(isinstance(i, ast.Slice) for i in index):  # cache[:, t] = y: a tensor
                    return name, "slices", filename, n.lineno, None  # written in place
                return (
                    name,
                    "bank",
                    filename,
                    n.lineno,
                    None,
                )  # bank[key] = y: a dict, list or tensor
        func = getattr(n, "func", None)
        if isinstance(func, ast.Attribute) and func.attr in (
            "append",
            "appendleft",
            "extend",
            "put",
        ):
            names = [getattr(x, "id", None) for a in n.args for x in ast.walk(a)]
            if any(name in made for name in names) and not _local_list(tree, func.value):
                return ast.get_source_segment(text, func.value), "bank", None, 1, None
    return None


def _local_list(tree, value):
    """Whether `value` names a list its function makes anew on every call (`outs = []` in the
    same function): it holds one call's values and cannot carry a graph into a later step."""
    if not isinstance(value, ast.Name):
        return False
    scope = _scope(tree, value.lineno)
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for n in ast.walk(scope):
        if isinstance(n, (ast.Global, ast.Nonlocal)) and value.id in n.names:
            return False
    return any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == value.id for t in n.targets)
        and isinstance(n.value, (ast.List, ast.Dict, ast.ListComp))
        and _scope(scope, n.lineno) is scope
        for n in ast.walk(scope)
    )


def _same(shown, name):
    # `model.c` outside the class is `self.c` inside it.
    if shown == name:
        return True
    inside = name.startswith("self.") and "." in shown
    return inside and shown.split(".", 1)[1] == name.split(".", 1)[1]


def _pair(filename, line, holder):
    # The tuple an LSTM hands each pass (`out, (h, c) = lstm(x, (h, c))`, `self.h, self.c`):
    # on the forward line, else where the holder's own file carries it (hx, cx = cell(..)).
    for where in (filename, holder[2]):
        for n in sorted(ast.walk(_parse(where)), key=lambda n: getattr(n, "lineno", 0) != line):
            if not isinstance(n, ast.Assign) or not isinstance(n.targets[0], ast.Tuple):
                continue
            # Read through `x.detach()` only, x hands the next pass no graph.
            detached = {
                _dotted(c.func.value)
                for c in ast.walk(n.value)
                if isinstance(c, ast.Call) and getattr(c.func, "attr", None) == "detach"
            }
            used = {name for name, _ in _names(n.value, ast.Load)} - detached
            carried = [name for name, _ in _names(n.targets[0], ast.Store) if name in used]
            if len(carried) > 1 and any(_same(holder[0], name) for name in carried):
                return ", ".join(carried), "pair", where, 2, None
    return None


def _parse(filename):
    text = "".join(linecache.getlines(filename))
    if _TREES.get(filename, (None,))[0] != text:
        try:
            _TREES[filename] = text, ast.parse(text)
        except (SyntaxError, ValueError):
            _TREES[filename] = text, ast.Module(body=[])
    return _TREES[filename][1]


def _assigned(filename, name, before):
    tree = _parse(filename)
    lines = sorted(
        t.lineno
        for n in ast.walk(tree)
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for target in getattr(n, "targets", None) or [n.target]
        for t in ast.walk(target)
        if getattr(t, "id", None) == name or getattr(t, "attr", None) == name
    )
    earlier = [line for line in lines if line <= before]
    return (earlier or lines or [None])[-1]


def _scope(tree, line):
    # The innermost function around the line, else the module.
    found = tree
    for n in ast.walk(tree):
        inside = isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            n.lineno < line <= n.end_lineno
        )
        if inside and n.lineno > getattr(found, "lineno", 0):
            found = n
    return found


def _loops(filename, line):
    # (first, last) lines of the loops around the line in its own function (or module).
    if not line:
        return []
    scope = _scope(_parse(filename), line)
    return [
        (n.lineno, n.end_lineno)
        for n in ast.walk(scope)
        if isinstance(n, LOOPS)
        and n.lineno <= line <= n.end_lineno
        and _scope(scope, n.lineno) is scope
    ]


def _made_in_pass(frame, name, freed_at=None):
    """Whether the local `name` is made anew in each pass of the innermost loop around the
    frame's line, before that line, from what does not read it (`outs = []`, `loss = f(x)`,
    `stacked = torch.stack(outs)`): it holds this pass's values, which reach an earlier pass's
    graph only through what carries it, and is not that carrier (`h` of `h = cell(x, h)` is).
    Outside a loop, each call of a function (a closure) is the pass.
    `freed_at`: the line of this function where the freeing call ran, if it did."""
    file, line = frame.f_code.co_filename, frame.f_lineno
    loops, tree = _loops(file, line), _parse(file)
    if loops:
        start, end = max(loops)
        loop = next(
            n
            for n in ast.walk(tree)
            if isinstance(n, LOOPS) and (n.lineno, n.end_lineno) == (start, end)
        )
    else:
        loop = _scope(tree, line)
        if not isinstance(loop, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        start = loop.lineno
    parts = [(start, [], [getattr(loop, "target", None)])]
    for n in ast.walk(loop):
        if n is loop or not isinstance(n, ast.stmt):
            continue
        if isinstance(n, (ast.If, ast.While)):
            parts.append((n.lineno, [n.test], []))
        elif isinstance(n, (ast.For, ast.AsyncFor)):
            parts.append((n.lineno, [n.iter], [n.target]))
        elif isinstance(n, (ast.With, ast.AsyncWith)):
            parts.append((n.lineno, [i.context_expr for i in n.items], []))
        elif not hasattr(n, "body"):
            parts.append((n.lineno, [n], []))
    for at, reads, stores in sorted(parts, key=lambda part: part[0]):
        found = [x for r in [*reads, *stores] if r is not None for x in ast.walk(r)]
        found = [x for x in found if isinstance(x, ast.Name) and x.id == name]
        augmented = any(isinstance(r, ast.AugAssign) for r in reads)
        if any(isinstance(x.ctx, ast.Load) for x in found) or (found and augmented):
            return False
        if found:  # run in every pass (not under an `if`), and not before a freeing call
            # earlier in this pass, which it may carry over
            direct = any(n.lineno == at and n in loop.body for n in reads)
            return direct and at < line and not (freed_at is not None and at < freed_at < line)
    return False


def _live(filename, line, frames):
    """Whether the function around the line (or the module) is running in one of the frames."""
    scope = _scope(_parse(filename), line)
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return True
    return any(
        frame.f_code.co_filename == filename
        and frame.f_code.co_name == scope.name
        and scope.lineno <= frame.f_lineno <= scope.end_lineno
        for frame in frames
    )


def _dotted(n):
    # `self.v` for an attribute chain on a name, `h` for a name, else None.
    if isinstance(n, ast.Attribute):
        base = _dotted(n.value)
        return base and base + "." + n.attr
    return n.id if isinstance(n, ast.Name) else None


def _names(root, ctx):
    return [
        (_dotted(n), n.lineno)
        for n in ast.walk(root)
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ctx)
    ]


def _carried_names(filename, line, whole=False):
    # What the statement at `line` (whole: each in the loop around it) reads that its pass
    # writes again there or later: the state one pass hands the next (`h` in
    # `out, h = rnn(x, h)`), never what each pass makes afresh (`x`, or `loss = f(x)` before
    # `loss = loss + g`).
    if not line:
        return []
    tree = _parse(filename)
    loops = [n for n in ast.walk(tree) if isinstance(n, LOOPS) and n.lineno < line <= n.end_lineno]
    if whole and not loops:
        return []
    block = max(loops, key=lambda n: n.lineno) if loops else _scope(tree, line)
    last = {}
    for name, at in _names(block, ast.Store):
        last[name] = max(at, last.get(name, 0))
    simple = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
    statements = sorted(
        (n for n in ast.walk(block) if isinstance(n, simple)), key=lambda n: n.lineno
    )
    # A value made under a condition (`if self.h is None: self.h = zeros`) is not made afresh
    # in every pass.
    guarded = {id(s) for n in ast.walk(block) if isinstance(n, ast.If) for s in ast.walk(n)}
    found, fresh = [], set()
    for statement in statements:
        reads = [name for name, _ in _names(statement, ast.Load)]
        if whole or statement.lineno == line:
            for name in reads:
                carried = name and last.get(name, 0) >= statement.lineno and name != "_"
                if carried and name not in fresh and name not in found:
                    found.append(name)
        if not isinstance(statement, ast.AugAssign) and id(statement) not in guarded:
            fresh.update(name for name, _ in _names(statement, ast.Store) if name not in reads)
    return found


def _accumulates(filename, name):
    # Whether some line adds to `name` (name += x, name = name + x) rather than replacing it.
    for n in ast.walk(_parse(filename)):
        if isinstance(n, ast.AugAssign) and _dotted(n.target) == name:
            return True
        targets = [_dotted(t) for t in n.targets] if isinstance(n, ast.Assign) else []
        if name in targets and name in (_dotted(r) for r in ast.walk(n.value)):
            return True
    return False


def _added(filename, name):
    """The source of what `name += x` (or `name = name + x`) adds, or None."""
    text = "".join(linecache.getlines(filename))
    for n in ast.walk(_parse(filename)):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and _dotted(n.target) == name:
            return ast.get_source_segment(text, n.value)
        if (
            isinstance(n, ast.Assign)
            and name in [_dotted(t) for t in n.targets]
            and isinstance(n.value, ast.BinOp)
            and isinstance(n.value.op, ast.Add)
            and _dotted(n.value.left) == name
        ):
            return ast.get_source_segment(text, n.value.right)
    return None


def _cached_around(site):
    """(file, line, text) of a `parametrize.cached()` whose block holds the loop around the
    raising line: the weight computed on its first use is reused, graph and all, by every step."""
    for code, line in site:
        tree = _parse(code.co_filename)
        for n in ast.walk(tree):
            calls = [i.context_expr for i in getattr(n, "items", ())]
            if not any(
                _dotted(getattr(c, "func", None)) in ("cached", "parametrize.cached")
                or getattr(getattr(c, "func", None), "attr", None) == "cached"
                for c in calls
            ):
                continue
            if any(isinstance(m, LOOPS) and m.lineno <= line <= m.end_lineno for m in ast.walk(n)):
                text = "".join(linecache.getlines(code.co_filename))
                return code.co_filename, n.lineno, ast.get_source_segment(text, calls[0])
    return None


def _ifs(site):
    # The (file, line) of each `if` whose body holds a line of the site.
    found = set()
    for code, line in site:
        for n in ast.walk(_parse(code.co_filename)):
            if isinstance(n, ast.If) and n.body[0].lineno <= line <= n.body[-1].end_lineno:
                found.add((code.co_filename, n.lineno))
    return found


def _fresh(value):
    # A state made anew (zeros, None, init_hidden(), detach()) rather than computed by a model.
    if isinstance(value, ast.Tuple):
        return all(map(_fresh, value.elts))
    if isinstance(value, ast.Call):
        name = _dotted(value.func) or getattr(value.func, "attr", "")
        return bool(re.search(r"zero|ones|rand|empty|full|init|detach|new_", name.lower()))
    return isinstance(value, ast.Constant)


def _window(site, name):
    """(file, start, outer, inner): `name` is computed afresh (an encoder's state) at line start
    of each pass of the loop at outer, then carried through the loop at inner, which holds the
    raising call; None if not so."""
    for code, line in site:
        loops = sorted(_loops(code.co_filename, line))
        if len(loops) < 2:
            continue
        (outer, _), (inner, _) = loops[-2], loops[-1]
        for n in ast.walk(_parse(code.co_filename)):
            targets = n.targets if isinstance(n, ast.Assign) else []
            written = {x for t in targets for x, _ in _names(t, ast.Store)}
            if name in written and outer < n.lineno < inner and not _fresh(n.value):
                return code.co_filename, n.lineno, outer, inner
    return None


def _gated_detach(filename, name):
    """The line where `name` (or "h, c") is detached under an `if` (every k-th chunk), or None."""
    names = set(name.split(", "))
    for n in ast.walk(_parse(filename)):
        if not isinstance(n, ast.If):
            continue
        for m in ast.walk(n):
            if not isinstance(m, ast.Assign):
                continue
            targets = {_dotted(x) for t in m.targets for x in ast.walk(t)}
            detach = any(getattr(x, "attr", None) == "detach" for x in ast.walk(m.value))
            if detach and targets & names:
                return m.lineno
    return None


def _bare_detach(filename, name):
    # The line of a `name.detach()` whose result is thrown away, if there is one.
    for n in ast.walk(_parse(filename)):
        call = getattr(n, "value", None) if isinstance(n, ast.Expr) else None
        func = getattr(call, "func", None)
        if getattr(func, "attr", None) == "detach" and _dotted(func.value) == name:
            return n.lineno
    return None


class _InplaceTemplate:
    def __init__(self, backward):
        found = {}

        def provoke():
            x = torch.zeros(1, dtype=torch.float32, requires_grad=True)
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
        # Torch 2.0 to 2.14 all match; anything else gets the message without its hint.
        self.prefix, shown, self.hint = match.groups() if match else (INPLACE + ": ", "", "")
        self.strip = match is not None and shown != found["name"]

    def message(self, tensor, version, owner):
        sizes = "[" + ", ".join(str(size) for size in tensor.shape) + "]"
        text = self.prefix + "[" + tensor.type() + " " + sizes + "]"
        if owner is not None:
            name = re.sub(r"Backward\d*$", "", owner[0]) if self.strip else owner[0]
            text += f", which is output {owner[1]} of {name},"
        text += f" is at version {tensor._version}; expected version {version} instead."
        return text + self.hint


class _Patches:
    """Replaces attributes of torch's objects and puts them back; notes the optimizers made."""

    def __init__(self):
        self.patched = []
        self.made = weakref.WeakSet()  # the optimizers made while this runs

    def _patch(self, owner, name, value):
        self.patched.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def _unpatch(self):
        for owner, name, value in reversed(self.patched):
            setattr(owner, name, value)
        self.patched = []

    def _track_optimizers(self):
        init = torch.optim.Optimizer.__init__

        @functools.wraps(init)
        def __init__(optimizer, *args, **kwargs):
            try:
                init(optimizer, *args, **kwargs)
            except BaseException as exc:
                exc.__traceback__ = exc.__traceback__.tb_next
                raise
            self.made.add(optimizer)

        self._patch(torch.optim.Optimizer, "__init__", _invisible(__init__))


class _Recorder(_Patches):
    """Records calls and saved tensors while a script runs; once the error fires, an
    _Explainer reads the records and writes the report."""

    def __init__(self, script=None, shown=None, quiet=False):
        super().__init__()
        self.script, self.shown, self.quiet, self.number = script, shown, quiet, 0
        self.top = self.current = self.pack_key = self.pack_at = self.marked = self.scan = None
        self.walk_top = self.walk_where = None
        self.first = self.last_free = self.retained = self.stepped = self.step_hook = None
        self.template = None
        self.report = self.reported = self.inplace = self.unprinted = None
        self.by_site, self.steps, self.lines, self.doubles = {}, {}, {}, []
        self.double_sites = set()
        self.said_aside = self.bare = self.bursts = False
        self.packs = self.reported_at = 0
        self.local = threading.local()

    def start(self):
        setattr(torch.autograd, KEY, self)
        self.original_backward = torch.autograd.backward
        self._patch(torch.autograd, "backward", self._wrap(torch.autograd.backward, "backward", 1))
        self._patch(torch.autograd, "grad", self._wrap(torch.autograd.grad, "grad", 3))
        func = getattr(torch, "func", None)
        for name in TRANSFORMS:
            if func is not None and hasattr(func, name):
                self._patch(func, name, self._aside(getattr(func, name)))
        if hasattr(torch, "vmap"):
            self._patch(torch, "vmap", self._aside(torch.vmap))
        self._track_optimizers()
        graph = torch.autograd.graph
        if hasattr(graph, "disable_saved_tensors_hooks"):
            self._patch(
                graph,
                "disable_saved_tensors_hooks",
                self._disabled(graph.disable_saved_tensors_hooks),
            )
        register = getattr(
            sys.modules[torch.optim.Optimizer.__module__], "register_optimizer_step_pre_hook", None
        )
        if register is not None:
            self.step_hook = register(self._stepped)
        self.bursts = _bursts_possible()
        self._hook()
        inner = getattr(threading.Thread, "_bootstrap_inner", None)  # Python 3.8 to 3.14
        if inner is not None:
            self._patch(threading.Thread, "_bootstrap_inner", self._threaded(inner))

    def _hook(self):
        self.local.aside = 0
        self.local.burst = None
        self.local.hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self.local.hooks.__enter__()

    def _threaded(self, inner):
        # Hooks pushed in a thread are popped before it ends: left on torch's thread-local
        # stack, they are released after the interpreter may have begun to shut down.
        def run(thread):
            if _active() is not self or self.bare:
                return inner(thread)
            self._hook()
            try:
                return inner(thread)
            finally:
                if self.local.aside == 0:
                    self.local.hooks.__exit__(None, None, None)
                self.local.hooks = None

        return run

    def stop(self):
        self._end_burst()
        if getattr(self.local, "hooks", None) is not None and self.local.aside == 0:
            self.local.hooks.__exit__(None, None, None)
        self.local.hooks = None
        self._unpatch()
        if self.step_hook is not None:
            self.step_hook.remove()
        if _active() is self:
            delattr(torch.autograd, KEY)

    def _pack(self, tensor):
        # Runs for every saved tensor: one op's tensors (an RNN's) share one (code, line, clock).
        frame = sys._getframe(1)
        at = frame.f_lasti
        # The frame itself, not its id: a library frame that returned (one Linear's forward)
        # leaves its address to the next (the next Linear's), at the same offset.
        if at != self.pack_at or frame is not self.pack_key:
            self.pack_key, self.pack_at, self.packs = frame, at, 1
            # A library frame met on the last walk up is still running: the reader's frame
            # above it is where it was (the Sequential around three Linears).
            below, known, top = None, _READER.get, self.walk_top
            while frame is not None:
                code = frame.f_code
                reader = known(id(code))
                if reader or (reader is None and _is_reader(code)):
                    where = code, frame.f_lineno
                    self.walk_top, self.walk_where = below, where
                    break
                if frame is top:
                    where = self.walk_where
                    break
                below, frame = frame, frame.f_back
            else:
                where = None, None
            self.pack_where = where + (self.number,)
            self.lines[((id(where[0]), where[1]),)] = self.number
        elif self.packs < BURST:
            self.packs += 1
            if self.packs == BURST and self.bursts:
                self._burst(frame)
        original = (lambda: tensor) if tensor._is_view() else weakref.ref(tensor)
        return tensor.detach(), tensor._version, original, self.pack_where

    def _unpack(self, saved):
        tensor, version, _, where = saved
        if tensor._version != version:
            if self.scan is not None:  # probed by _owner or _search
                self.scan.append(saved)
            else:
                self.inplace = (saved, _current_node() if _current_node is not None else None)
                raise RuntimeError(self._inplace_message(saved))
        call = self.current
        # A node reads its saved tensors in a call that keeps no graph: that call frees them.
        if call is not None and not call.retain_graph and _current_node is not None:
            node = _current_node()
            if node is not self.marked:
                self.marked = node
                node.metadata.setdefault(FREED, (call,) + where)
        return tensor

    def _burst(self, frame):
        """A library call (an RNN's) saves many tensors: save the rest without these hooks,
        until the call returns to `frame`; then its outputs stand for the nodes it made."""
        local = self.local
        hooks = getattr(local, "hooks", None)
        if (
            hooks is None
            or local.aside
            or local.burst is not None
            or _is_reader(frame.f_code)
            or sys.getprofile() is not None
            # In a backward (create_graph=True) the engine runs on a copy of the hooks' stack.
            or _current_node() is not None
        ):
            return
        top = _top_hooks(False)
        if top is None or top[0] is not hooks.pack_hook:  # others' hooks (a checkpoint's)
            return
        # What the call was given: the nodes it makes come after theirs.
        start = max(
            (
                _sequence(t.grad_fn)
                for v in frame.f_locals.values()
                for t in _tensors_in(v)
                if t.grad_fn is not None
            ),
            default=-1,
        )
        _pop_hooks()
        local.burst = frame, list(self.pack_where) + [start, None]
        sys.setprofile(self._burst_event)

    def _burst_event(self, frame, event, arg):
        # The first event in the library frame (or a call it makes) after the saving call.
        burst = getattr(self.local, "burst", None)
        if burst is None:
            sys.setprofile(None)
            return
        caller = burst[0]
        if frame is not caller and (
            event != "call" or frame.f_back is not caller or frame.f_code is _PACK
        ):
            return
        outputs = [arg] if event == "return" else list(caller.f_locals.values())
        if event == "call":
            outputs += list(frame.f_locals.values())
        region = self._end_burst()
        for tensor in (t for v in outputs for t in _tensors_in(v)):
            node = tensor.grad_fn
            if node is not None and _sequence(node) > region[3] and REGION not in node.metadata:
                node.metadata[REGION] = region
                node.register_prehook(self._reached)

    def _end_burst(self):
        """Put the hooks back after a burst (if one is under way here); return its region."""
        local = self.local
        burst = getattr(local, "burst", None)
        if burst is None:
            return None
        sys.setprofile(None)
        local.burst = None
        _push_hooks(local.hooks.pack_hook, local.hooks.unpack_hook)
        self.pack_at = None
        return burst[1]

    def _reached(self, grads):
        # A backward reaches the output of a burst: a call that keeps no graph frees it all.
        call = self.current
        if call is not None and not call.retain_graph:
            node = _current_node()
            region = node.metadata[REGION]
            if region[4] is None:  # the first call through one output frees what all share
                region[4] = call
            node.metadata.setdefault(FREED, (region[4],) + tuple(region[:3]))

    def _stepped(self, optimizer, *_):
        # Only a kept graph can see a step change a saved tensor.
        if self.retained is not None:
            self.stepped = (_site(sys._getframe(1), self.top), self.number)
        known = self.steps.get(id(optimizer))
        ref = known[1] if known and known[1]() is optimizer else weakref.ref(optimizer)
        self.steps[id(optimizer)] = (self.number, ref)

    def _wrap(self, original, kind, at):
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            call = None
            # A call made during another is the reader's only from the reader's own code (a
            # tensor hook); torch's own (a reentrant checkpoint's) belong to the outer call.
            if (
                (self.current is None or _within_reader(sys._getframe(1)))
                and not getattr(self.local, "aside", 1)
                and _active() is self
            ):
                call = self._start(kind, args, kwargs, at, sys._getframe(1))
            outer, self.current = self.current, call or self.current
            try:
                result = original(*args, **kwargs)
            except BaseException as exc:
                self.current = outer
                if (
                    call
                    and isinstance(exc, RuntimeError)
                    and (BACKWARD_TWICE in str(exc) or INPLACE in str(exc))
                    # not again where a call made inside this one (from a custom Function's
                    # backward) raised it and was reported
                    and not (self.report is not None and self.reported_at > call.number)
                ):
                    with contextlib.suppress(Exception):
                        _Explainer(self).on_error(exc, call, _frames(sys._getframe(1), self.top))
                exc.__traceback__ = exc.__traceback__.tb_next
                raise
            self.current = outer
            if call:
                self._done(call, result)
            return result

        return _invisible(wrapper)

    def _start(self, kind, args, kwargs, at, frame):
        retain = args[at + 1] if len(args) > at + 1 else kwargs.get("retain_graph")
        create = args[at + 2] if len(args) > at + 2 else kwargs.get("create_graph", False)
        roots = args[0] if args else kwargs.get("tensors" if kind == "backward" else "outputs")
        if getattr(self.local, "burst", None) is not None:  # no event came to end it
            self._end_burst()
        self.number += 1
        call = _Call()
        call.number, call.kind, call.site = self.number, kind, _site(frame, self.top)
        call.retain_graph = bool(create) if retain is None else bool(retain)
        tensors = _kind(roots)[1]
        call.roots = tuple(weakref.ref(t) for t in tensors)
        call.results = ()
        key = _key(call.site)
        call.previous, runs = self.by_site.get(key, (None, 0))
        call.runs = runs + 1
        # A pack since the last call: a forward pass ran in between.
        call.fresh, self.pack_key = self.pack_key is not None, None
        self.by_site[key] = (call.number, call.runs)
        self.first = self.first or call
        call.seq, call.under = -1, set()
        self.inplace = None
        for tensor in tensors:
            if tensor.grad_fn is not None:
                tensor.grad_fn.metadata.setdefault(ROOT, call)
                call.seq = max(call.seq, _sequence(tensor.grad_fn))
                call.under.update(_sequence(child) for child in _children(tensor.grad_fn))
        return call

    def _done(self, call, result):
        self.pack_key = self.marked = self.walk_top = None
        if call.retain_graph:
            self.retained = call
        else:
            self.last_free = call
        if call.kind == "grad":
            call.results = tuple(weakref.ref(t) for t in _kind(result)[1])
        self._walk_after(call)

    def _walk_after(self, call):
        stack = _roots(call)
        seen = {}  # id -> node: keeps each node's Python object, and so its id, alive
        while stack and len(seen) < WALK_LIMIT:
            node = stack.pop()
            if id(node) in seen or hasattr(node, "variable"):
                continue
            seen[id(node)] = node
            meta = node.metadata
            if FREED in meta:
                continue  # it saved tensors: torch itself guards what lies below
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
        entry = {
            "first": self.place(first.site, first.number),
            "second": self.place(second.site, second.number),
            "node": node.name(),
        }
        self.doubles.append(entry)
        sys.stderr.write(
            f"{PREFIX}warning: call {second.number} at {_where(entry['second'])} went through nodes"
            f" call {first.number} at {_where(entry['first'])} had gone through without"
            " retain_graph; they saved no tensors, so torch did not raise, and their gradients"
            f" were added again ({ISSUE_13494})\n"
        )

    def _aside(self, transform):
        @functools.wraps(transform)
        def transformed(*args, **kwargs):
            inner = transform(*args, **kwargs)

            @functools.wraps(inner)
            def run(*a, **k):
                self._step_aside(True)
                try:
                    return inner(*a, **k)
                finally:
                    self._step_back()

            return _invisible(run)

        return transformed

    def _disabled(self, original):
        @contextlib.contextmanager
        def disable_saved_tensors_hooks(message):
            self._step_aside(False)
            try:
                with original(message):
                    yield
            finally:
                self._step_back()

        return disable_saved_tensors_hooks

    def _step_aside(self, say):
        local = self.local
        if getattr(local, "hooks", None) is None:
            local.aside = getattr(local, "aside", 0) + 1
            return
        if local.aside == 0:
            local.hooks.__exit__(None, None, None)
            if say and not self.said_aside:
                self.said_aside = True
                sys.stderr.write(PREFIX + "not recording inside torch.func transforms\n")
        local.aside += 1

    def _step_back(self):
        local = self.local
        local.aside -= 1
        if local.aside == 0 and getattr(local, "hooks", None) is not None:
            local.hooks.__enter__()

    def _inplace_message(self, saved):
        if self.template is None:
            self.bare = True
            try:
                self.template = _InplaceTemplate(self.original_backward)
            finally:
                self.bare = False
        return self.template.message(saved[0], saved[1], self._owner(saved))

    def _owner(self, saved):
        # Its own probing below marks nothing: this error stops the node.
        node = self.marked = _current_node() if _current_node is not None else None
        if node is not None:
            for name in dir(node):
                if not name.startswith("_saved_result"):
                    continue
                self.scan = []
                with contextlib.suppress(Exception):
                    getattr(node, name)
                found, self.scan = self.scan, None
                if any(item is saved for item in found):
                    digits = name[len("_saved_result") :]
                    return node.name(), int(digits) if digits.isdigit() else 0
        original = saved[2]()
        if original is None or original.grad_fn is None:
            return None
        return original.grad_fn.name(), original.output_nr

    def saved_read(self, exc):
        """An error raised outside a backward call: a saved tensor read after it was freed."""
        if self.reported is not exc and BACKWARD_TWICE in str(exc):
            _Explainer(self).saved_read(exc)

    def show(self, filename):
        if self.script is not None and filename == self.script:
            return self.shown
        return _cell(filename) or filename

    def at(self, filename, line, call=False):
        place = {"file": self.show(filename), "line": line, "code": _source(filename, line)}
        raw = linecache.getline(filename, line or 0).expandtabs() if filename else ""
        place["indent"] = len(raw) - len(raw.lstrip())
        if call is not False:
            place["call"] = call
        return place

    def place(self, site, call=None):
        if not site:
            return {"file": None, "line": None, "code": None, "call": call, "callers": []}
        place = self.at(site[0][0].co_filename, site[0][1], call)
        place["callers"] = [self.at(c.co_filename, n) for c, n in site[1:]]
        return place

    def result(self):
        if self.report is not None:
            return self.report
        keys = ("error", "cause", "raised", "freed_by", "node", "fix", "checker")
        return dict(
            dict.fromkeys(keys),
            torch=torch.__version__,
            lines=[],
            double_traversals=self.doubles,
            fixes=[],
        )


class _Explainer:
    """The facts at the error (what raised, what freed it, where it was built, what holds it),
    the cause, and the report with its fix candidates, read from a _Recorder's records."""

    def __init__(self, rec):
        self.rec = rec
        # At the error: the freeing call's site, and the losses it went back from that the
        # raising call does not reach (no holder is one of those).
        self.freed_site, self.stale = [], set()

    def saved_read(self, exc):
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            if _is_reader(tb.tb_frame.f_code) and tb.tb_frame is not self.rec.top:
                frames.insert(0, (tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        if not frames:
            return
        frame, line = frames[0]
        filename = frame.f_code.co_filename
        code = _source(filename, line)
        candidates = list(self._nodes_named(frame, code or ""))
        found, _, _ = self._search(candidates, None)
        if not found:
            everything = list(frame.f_locals.values()) + list(frame.f_globals.values())
            found, _, _ = self._search([n for n in map(_node_of, everything) if n], None)
        raised = self.rec.place([(f.f_code, n) for f, n in frames])
        self._finish(exc, raised, None, found, set(), False, [f for f, _ in frames])

    def on_error(self, exc, call, frames):
        if INPLACE in str(exc):
            return self._after_retain(exc, call, frames)
        stack = _roots(call)
        self._finish(
            exc, self.rec.place(call.site, call.number), call, *self._search(stack, call), frames
        )

    def _search(self, stack, call):
        # leaves: 2 if a leaf was reached, 1 if only nodes this call went through, else 0
        seen, found, roots, leaves = {}, [], set(), 0
        self.rec.scan = []
        try:
            while stack and len(seen) < SEARCH_LIMIT:
                node = stack.pop()
                if id(node) in seen:
                    continue
                seen[id(node)] = node
                if hasattr(node, "variable"):
                    leaves = 2
                    continue
                meta = getattr(node, "metadata", None)
                if not isinstance(meta, dict):
                    continue
                roots.add(meta.get(ROOT))
                mark = meta.get(FREED)
                region = meta.get(REGION)
                # An output of a burst no call went through (an RNN's last hidden state),
                # whose nodes the call that went through another output freed.
                if mark is None and region and region[4] and _inside(node, region[3]):
                    mark = (region[4],) + tuple(region[:3])
                # A value no pack hook saw (a wrapped Python number): freed by the call that
                # last went through the node, or by the last one since it was built.
                last = meta.get(WALKED) or self.rec.last_free
                if (
                    mark is None
                    and last not in (None, call)
                    and (last.seq > _sequence(node) if _sequence(node) >= 0 else WALKED in meta)
                    and _dead(node)
                ):
                    mark = (last, None, None, None)
                if mark is not None and mark[0] is not call:
                    found.append((node, mark))
                    continue
                leaves = leaves or int(mark is not None)
                stack.extend(_children(node))
        finally:
            self.rec.scan = None
        return found, roots, leaves

    def _nodes_named(self, frame, code):
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

    def _holder(self, target, frames, prefer=()):
        best, scanned = None, set()
        for order, frame in enumerate(frames):
            scopes = [frame.f_locals]
            if id(frame.f_globals) not in scanned:
                scanned.add(id(frame.f_globals))
                scopes.append(frame.f_globals)
            freed_at = ([n for c, n in self.freed_site if c is frame.f_code] or [None])[0]
            for scope in scopes:
                for name, value in list(scope.items()):
                    items = [(name, value, False)]
                    if not isinstance(
                        value, (type, types.ModuleType, types.FunctionType, torch.Tensor)
                    ):
                        items += [(name + "." + a, v, True) for a, v in _attributes(value)]
                    for shown, item, attr in items:
                        kind, tensors = _kind(item)
                        depths = [
                            _depth(t.grad_fn, target) for t in tensors if t.grad_fn is not None
                        ]
                        depths = [d for d in depths if d is not None]
                        if not depths or (kind == "tensor" and id(item) in self.stale):
                            continue
                        if (
                            not attr
                            and scope is frame.f_locals
                            and _made_in_pass(frame, name, freed_at)
                        ):
                            continue  # this pass's values only (`outs = []` in the loop)
                        preferred = any(_same(shown, name) for name in prefer)
                        rank = (not preferred, min(depths or [0]), order)
                        if best is None or rank < best[0]:
                            kind = "attr" if attr and kind == "tensor" else kind
                            best = (
                                rank,
                                shown,
                                kind,
                                frame.f_code.co_filename,
                                len(depths),
                                item,
                            )
        return best[1:] if best else None

    def _after_retain(self, exc, call, frames):
        kept = self.rec.retained
        if self.rec.inplace is not None:  # these hooks found it
            node, where = self.rec.inplace[1], self.rec.inplace[0][3]
        else:  # torch did, in a tensor a burst saved
            node, where = self._changed_in_burst(call)
        if where is None or kept is None or kept.number <= where[2]:
            return
        found = [(node, (kept,) + where)] if node is not None else []
        changed = None
        if self.rec.stepped and self.rec.stepped[1] >= kept.number and self.rec.stepped[0]:
            changed = self.rec.place(self.rec.stepped[0])
        self._finish(
            exc, self.rec.place(call.site, call.number), call, found, set(), 2, frames, changed
        )

    def _changed_in_burst(self, call):
        """The node, below an output of a burst, whose saved tensor torch found changed in
        place, and the burst's (code, line, clock); (None, None) if there is none."""
        stack, seen = [(node, None) for node in _roots(call)], {}
        self.rec.scan = []  # these hooks' own saved tensors are probed without raising
        try:
            while stack and len(seen) < SEARCH_LIMIT:
                node, region = stack.pop()
                if id(node) in seen or hasattr(node, "variable"):
                    continue
                seen[id(node)] = node
                here = node.metadata.get(REGION) if isinstance(node, _Node) else None
                if here is not None:
                    region = here
                elif region is not None and _sequence(node) <= region[3]:
                    region = None  # below the burst, among what it was given
                if region is not None and _dead(node, INPLACE):
                    return node, tuple(region[:3])
                stack.extend((child, region) for child in _children(node))
        finally:
            self.rec.scan = None
        return None, None

    def _finish(self, exc, raised, call, found, roots, leaves, frames, changed=None):
        ev = self._evidence(found, frames, call)
        cause = self._classify(ev, call, roots, leaves, frames)
        retained = changed is not None or INPLACE in str(exc)
        self.rec.report = None
        report = dict(self.rec.result(), error=str(exc), raised=raised)
        report["cause"] = "inplace-after-retain" if retained else cause
        if ev.freeing is not None:
            report["freed_by"] = dict(
                self.rec.place(ev.freeing.site, ev.freeing.number),
                retain_graph=ev.freeing.retain_graph,
            )
        if ev.node is not None and ev.line:
            report["node"] = dict(self.rec.at(ev.filename, ev.line, None), name=ev.node.name())
        if cause is not None:
            self._explain(report, ev, cause, call, roots, frames, retained, changed)
        if cause is None and call is not None:  # no freeing call seen: torch's own (a checkpoint's)
            report["fixes"] = self._shown_fixes(
                _fix_reentrant([c.co_filename for c, _ in call.site])
            )
        report["lines"] = self._lines(report, cause, ev.clock, ev.freeing, call, changed)
        self.rec.report = report
        self.rec.reported, self.rec.reported_at = exc, self.rec.number
        if not self.rec.quiet:
            if self.rec.script is None:
                _emit(format_report(report))
            else:
                self.rec.unprinted = format_report(report)

    def _evidence(self, found, frames, call):
        """The freed node, the call that freed it, where it was built and when, and its holder."""
        node, mark = max(found, key=lambda item: _sequence(item[0])) if found else (None, None)
        region = node.metadata.get(REGION) if node is not None else None
        if region is not None:  # an output of a burst: the latest of its nodes that were freed
            node = max(_inside(node, region[3]) or [node], key=_sequence)
        freeing = mark[0] if mark else None
        # The loss an earlier call went back from, still bound (`loss = opt.step(closure)`),
        # reaches the node but carries nothing into this step, unless this call reaches it
        # (`loss - best_loss`).
        old = [r() for r in freeing.roots] if freeing is not None else []
        raising = _roots(call) if call is not None else []
        self.stale = {
            id(t)
            for t in old
            if t is not None
            and t.grad_fn is not None
            and not any(_depth(r, t.grad_fn) is not None for r in raising)
        }
        self.freed_site = freeing.site if freeing is not None else []
        holder = self._holder(node, frames) if node is not None else None
        shown = None
        if node is not None and mark is not None and mark[1] is None:
            # The node saved a Python number: date it by the nearest node below that saved a
            # tensor, and show the line of the number's operation.
            below = _scalar_site(node)
            if below is not None:
                mark, shown = (mark[0],) + tuple(below[0][1:]), below[1]
        code, line, clock = mark[1:] if mark else (None, None, None)
        filename = code.co_filename if code else None
        if clock == 0 and self.rec.lines.get(_key(((code, line),))):
            clock = -1
        for frame in frames if clock is not None and clock >= 0 else ():
            if frame.f_code is code:  # built in the function that raised
                loops = _loops(code.co_filename, frame.f_lineno)
                first, last = max(loops, default=(0, 0))
                if clock == 0:  # in the loop that raised: an earlier pass of it
                    clock = -1 if first <= line <= last else clock
                elif line < first and freeing.number == clock + 1:  # before its loop began
                    clock = 0
                break
        updated = node is not None and filename is None and self._updated_in_place(node, frames)
        if updated:  # an EMA of another model's weights, run with autograd on
            filename, line, clock = updated[1], updated[2], -1
        elif node is not None and filename is None:
            if holder:
                filename = holder[2]
                at = [n for c, n in freeing.site if c.co_filename == filename]
                line = _assigned(filename, holder[0].split(".")[-1], at[-1] if at else 1 << 30)
            first = [n for c, n in self.rec.first.site if c.co_filename == filename]
            clock = 0 if line and first and line < first[-1] else None
        return types.SimpleNamespace(
            node=node,
            freeing=freeing,
            holder=holder,
            code=code,
            line=line,
            shown=shown,
            clock=clock,
            filename=filename,
            updated=updated,
            trained=False,
        )

    def _classify(self, ev, call, roots, leaves, frames):
        """The cause; notes on `ev` whether a step since the freeing call trains the node."""
        node, freeing, code, line, clock = ev.node, ev.freeing, ev.code, ev.line, ev.clock
        steps = self.rec.step_hook and self.rec.steps
        # Whether an optimizer that stepped since the freeing call trains what lies under the
        # node: one walk of the graph, read by the cause and the fix.
        trained = node is not None and freeing is not None and _trained(node, steps, freeing.number)
        once = (
            freeing is not None
            and code is not None
            and self.rec.lines.get(_key(((code, line),)), 0) < freeing.number
            and self._one_pass(code, line, frames, freeing, trained)
        )
        direct = (
            node is not None and freeing is not None and _sequence(node) in freeing.under - {-1}
        )
        # The node's line ran again after the freeing call (a new forward pass, here a warm-up's
        # graph carried into the loop through a helper's two callers) but the node is older;
        # not where optimizers step and none has since the freeing call: that is one step, whose
        # line ran again on other inputs (a GAN's discriminator on the real batch).
        made = freeing is not None and code is not None and self._optimizers()
        rebuilt = (
            freeing is not None
            and code is not None
            and clock is not None
            and clock < freeing.number
            and self.rec.lines.get(_key(((code, line),)), 0) >= freeing.number
            and not (self.rec.step_hook and made and not self._stepped_since(freeing.number))
        )
        ev.trained = trained
        ev.line = ev.shown or line
        return _cause(call, freeing, clock, roots, leaves, once, direct, rebuilt)

    def _explain(self, report, ev, cause, call, roots, frames, retained, changed):
        """Fill in the checker's answers, the fix sentence and the fix candidates."""
        sub, holder, between = None, ev.holder, None
        freeing, trained = ev.freeing, ev.trained
        if cause == "carried-state":
            sub, holder = self._carried_kind(report, ev, call, roots, frames)
        elif cause == "shared-forward" and freeing.kind == "grad":
            sub = "grad"
        key = cause + "/" + sub if cause + "/" + str(sub) in CHECKER else cause
        report["checker"] = CHECKER[key]
        if cause == "shared-forward" and trained and self.rec.step_hook and not retained:
            between = self._between(ev.node, freeing, call, frames)
        if cause == "same-loss-twice" and call is not None and freeing.site != call.site:
            # The second call starts from a sum of losses the first already went back
            # through (a log kept as a tensor): ("summed", (name, what it adds)).
            for loss, frame, _ in self._root_names(call, frames):
                added = _added(frame.f_code.co_filename, loss)
                if added:
                    between = "summed", (loss, added)
                    break
        report["fix"] = self._sentence(
            cause, sub, report, freeing, holder, retained, call, trained, between
        )
        facts = self._facts(
            cause, sub, holder, between, call, freeing, ev.filename, ev.line, ev.node, frames
        )
        report["fixes"] = self._shown_fixes(
            _candidates(_Facts(**facts, retained=retained, trained=trained, text=report["fix"]))
        )
        if retained:
            report["checker"] = report["checker"].replace("retain=none", "retain=retain")
            report["fix"] = (
                "The graph kept at {} was used again after {} changed a tensor it saved; "
                "instead of keeping it: {}{}".format(
                    _where(report["freed_by"]),
                    _where(changed) if changed else "an in-place operation",
                    report["fix"][0].lower(),
                    report["fix"][1:],
                )
            )

    def _carried_kind(self, report, ev, call, roots, frames):
        """What carries the state across steps: (the checker's kind of it, its holder)."""
        node, filename, line, freeing = ev.node, ev.filename, ev.line, ev.freeing
        holder = self._carried_holder(node, frames, filename, line) or ev.holder
        holder = _stored(filename, line) or holder
        if holder and holder[1] in ("tensor", "attr"):
            holder = _pair(filename, line, holder) or holder
        # A list that also holds tensors no earlier call went through is the loss's
        # source (REINFORCE's log-probs), not a cache of old outputs.
        new = holder and holder[4] is not None and not isinstance(holder[4], torch.Tensor)
        new = new and any(
            not self._search([t.grad_fn], call)[0] for t in _kind(holder[4])[1] if t.grad_fn
        )
        again = self._ran_again(ev.code, freeing)
        sub = _carried(call, freeing, holder, roots, ev.clock, ev.trained, new, again)
        if sub == "clear" and _kept_on_purpose(holder[2], holder[0]):
            sub = "store"  # a replay buffer or a queue, not this update's losses
        if sub == "before" and holder and _target(call, node, holder[0], holder[2]):
            sub = "target"
        if ev.updated:
            sub, holder = "ema", (ev.updated[0], "module", ev.updated[1], ev.updated[2], None)
        if sub == "slices":  # torch stops at the earlier step's in-place write
            report["node"] = dict(self.rec.at(filename, holder[3], None), name="CopySlices")
        return sub, holder

    def _one_pass(self, code, line, frames, freeing, trained):
        # The node's line ran once, before both calls: are they one pass of what runs it
        # (micro-batches, heads, critic steps) rather than two training steps? Not if an
        # optimizer training what lies under the node stepped between them.
        if self.rec.step_hook and self.rec.steps and trained:
            return False
        for frame in frames:
            if frame.f_code is code:  # yes if the line is in a loop (or function) around the raise
                loops = _loops(code.co_filename, frame.f_lineno)
                if not loops:
                    return code.co_name != "<module>"
                return any(first <= line <= last for first, last in loops)
        if self._ran_again(code, freeing):  # what runs the line ran again, this line not
            return True
        return bool(self.rec.step_hook) and not self._stepped_since(freeing.number)

    def _updated_in_place(self, node, frames):
        """(name, file, line) of a model whose parameters were updated in place with autograd
        on (`t.mul_(decay).add_(s)` with no torch.no_grad()), so that they hold a graph that
        reaches the node; None if there is none."""
        for frame in frames:
            for name, value in {**frame.f_globals, **frame.f_locals}.items():
                if not isinstance(value, torch.nn.Module):
                    continue
                grads = [p.grad_fn for p in value.parameters() if p.grad_fn is not None]
                if not any(_depth(g, node) is not None for g in grads[:8]):
                    continue
                filename = frame.f_code.co_filename
                for n in ast.walk(_parse(filename)):
                    if not isinstance(n, ast.For) or name not in dict(_names(n.iter, ast.Load)):
                        continue
                    for m in ast.walk(n):
                        attr = getattr(getattr(m, "func", None), "attr", "")
                        if isinstance(m, ast.Call) and attr.endswith("_") and m.lineno > n.lineno:
                            return name, filename, m.lineno
        return None

    def _root_names(self, call, frames):
        """(name, frame, scope) for each name a reader frame binds to a tensor the call started
        from (`epoch_loss` for epoch_loss.backward()), innermost frame first."""
        roots = [r() for r in call.roots]
        for frame in frames:
            scope = {**frame.f_globals, **frame.f_locals}
            for name, value in scope.items():
                if any(value is r for r in roots if r is not None):
                    yield name, frame, scope

    def _between(self, node, freeing, call, frames):
        """Two losses on one forward pass, and an optimizer training the node's own parameters
        stepped between their calls. ("again", None): another optimizer trains them too, so the
        second loss should reach them through a pass of its own. ("one", None): the stepped
        optimizers train what the second loss reaches besides (one optimizer for both losses).
        ("detach", (name, file, line)): the second loss should not reach them (an actor's loss
        through the critic's value); `name` is what it reaches them through, closest to the loss,
        that leads to no parameter only other optimizers train but through the node."""
        # A node deep inside the pass (a log-prob's correction below a policy's layers) uses no
        # parameter itself: the pass's are those below it.
        own = _own_params(node) or _params([node])
        stepped = [ref() for number, ref in self.rec.steps.values() if number >= freeing.number]
        stepped = [o for o in stepped if o is not None and own & _held(o)]
        if not own or not stepped or call is None:
            return None
        others = [o for o in self._optimizers() if all(o is not s for s in stepped)]
        if any(own & _held(o) for o in others):
            return "again", None
        elsewhere = set().union(*map(_held, others)) - set().union(*map(_held, stepped))
        roots = _roots(call)
        if not _params(roots, node) & elsewhere and not _predicts(_roots(freeing), node):
            return "one", None
        for loss, frame, scope in self._root_names(call, frames):
            filename = frame.f_code.co_filename
            line = _assigned(filename, loss, frame.f_lineno)
            statement = [
                n
                for n in ast.walk(_parse(filename))
                if isinstance(n, (ast.Assign, ast.AugAssign)) and n.lineno == line
            ]
            used = {x.id for n in statement for x in ast.walk(n.value) if isinstance(x, ast.Name)}
            found = []
            for name, value in scope.items():
                grad_fn = (
                    getattr(value, "grad_fn", None) if isinstance(value, torch.Tensor) else None
                )
                depth = grad_fn is not None and name != loss and _depth(grad_fn, node)
                if depth is None or depth is False:
                    continue
                if name in used or any(_depth(r, grad_fn) is not None for r in roots):
                    found.append((name not in used, -depth, name, grad_fn))
            for _, _, name, grad_fn in sorted(found, key=lambda f: f[:3]):
                if not _params([grad_fn], node) & elsewhere:  # it leads only to the node
                    # Whether the loss trains anything but through it: a generator's loss
                    # trains only through the discriminator's score; an actor's has its policy.
                    alone = not _params(roots, stop=grad_fn)
                    return "detach", (name, filename, line, alone)
        return None

    def _optimizers(self):
        # Every optimizer alive: those made since the start, where it came first (a script run
        # by the runner or the capture), else a scan of every object (around a loop, a notebook).
        if self.rec.script is None:
            return [o for o in gc.get_objects() if issubclass(type(o), torch.optim.Optimizer)]
        return list(self.rec.made)

    def _stepped_since(self, number):
        # Whether an optimizer stepped after call `number`, as the step hook saw it.
        return any(step >= number for step, _ in self.rec.steps.values())

    def _ran_again(self, code, freeing):
        return code is not None and any(
            key[0][0] == id(code) and number >= freeing.number
            for key, number in self.rec.lines.items()
        )

    def _carried_holder(self, node, frames, filename, line):
        # The carried name, read and written again by each pass, on the forward line or in the
        # loop that raised; kept on an attribute, it is state like an RNN's all the same.
        own = _carried_names(filename, line)
        prefer = set(own)
        for frame in frames:
            prefer.update(_carried_names(frame.f_code.co_filename, frame.f_lineno, True))
        holder = self._holder(node, frames, prefer) if prefer else None
        if holder and any(_same(holder[0], name) for name in prefer):
            return (holder[0], "tensor" if holder[1] == "attr" else holder[1]) + holder[2:]
        if len(own) == 1 and ("." in own[0] or _live(filename, line, frames)):
            return own[0], "tensor", filename, 1, None  # state no frame reaches (self.v)
        return None  # a local of a call that returned (an ODE solver's `x`): not what carries

    def _lines(self, report, cause, clock, freeing, call, changed):
        when = {0: ", before the loop"}.get(clock, ", in an earlier step")
        kept = report["cause"] == "inplace-after-retain"
        lines = [
            (
                report["node"],
                "forward",
                "{} built here" + (when if cause == "carried-state" else ""),
            ),
            (
                report["freed_by"],
                "kept" if kept else "frees",
                "{} "
                + (
                    "kept the graph here (retain_graph=True)"
                    if kept
                    else "freed the saved tensors here"
                ),
            ),
            (changed, "changed", "changed the saved tensor here (optimizer step)"),
            (
                report["raised"],
                "raises",
                "{} raised here" if call else "read the freed saved tensor here",
            ),
        ]
        names = {
            "forward": report["node"] and report["node"]["name"],
            "raises": call and self._call(call),
        }
        names["kept"] = names["frees"] = freeing and self._call(freeing)
        lines = [
            dict(place, kind=kind, label=label.format(names.get(kind)))
            for place, kind, label in lines
            if place
        ]
        order = ("forward", "kept", "frees", "changed", "raises")
        return sorted(lines, key=lambda e: (str(e["file"]), e["line"] or 0, order.index(e["kind"])))

    def _call(self, call):
        runs = self.rec.by_site.get(_key(call.site), (0, 0))[1]
        step = f" (iteration {call.runs})" if runs > 1 else ""
        return f"{call.kind} call {call.number}{step}"

    def _sentence(
        self, cause, sub, report, freeing, holder, retained, call=None, trained=False, between=None
    ):
        raised, first = report["raised"], report["freed_by"]
        callers = first and first["callers"] and raised.get("callers")
        if callers and first["line"] == raised["line"] and callers[0] != first["callers"][0]:
            raised, first = raised["callers"][0], first["callers"][0]  # a helper's two callers
        # Called back by an optimizer's step (`opt.step(closure)`), not by a `dp_step(losses)`.
        caller = raised["callers"][0]["code"] or "" if raised.get("callers") else ""
        closure = re.search(r"\.step\(", caller) is not None
        raised = _where(raised)
        first = _where(first) if first else "the earlier call"
        again = raised == first  # one line, run more than once
        built = _where(report["node"]) if report["node"] else "its forward line"
        name = holder[0] if holder else None
        var = f"`{name}`" if name else f"the tensor built at {built}"
        name = name or "x"
        pair = (
            ", ".join(n + ".detach()" for n in name.split(", "))
            if ", " in name
            else f"tuple(s.detach() for s in {name})"
        )
        words = dict(raised=raised, first=first, again=again, built=built, name=name, var=var)
        words.update(pair=pair, closure=closure, sub=sub, freeing=freeing, holder=holder)
        words.update(retained=retained, call=call, trained=trained, between=between)
        words.update(
            show=self.rec.show, step_hook=self.rec.step_hook, stepped_since=self._stepped_since
        )
        return _SAY.get(cause, _say_saved)(types.SimpleNamespace(**words))

    def _facts(self, cause, sub, holder, between, call, freeing, filename, line, node, frames):
        """What the fix candidates read: real files and lines, and the holder found."""
        rsite = [(c.co_filename, n) for c, n in call.site] if call else []
        fsite = [(c.co_filename, n) for c, n in freeing.site]
        if rsite[1:] and fsite[1:] and rsite[0] == fsite[0] and rsite[1] != fsite[1]:
            rsite, fsite = rsite[1:], fsite[1:]  # a helper's two callers
        name = holder[0] if holder else None
        hfile = (holder[2] if holder else None) or filename or (rsite or fsite)[0][0]
        special = bool(call and _cached_around(call.site))
        if sub in ("rnn", "lstm", "lstm-both") and call and name:
            special = special or bool(_window(call.site, name))
        summed = between[1] if between and between[0] == "summed" else None
        scope = _scope(_parse(filename), line) if filename and line else None
        in_init = getattr(scope, "name", None) == "__init__"
        carried = cause == "carried-state" or (cause == "shared-forward" and in_init)
        deep, tuples, beside, states = self._deep(node, frames) if carried else ([],) * 4
        return dict(
            cause=cause,
            sub=sub or "",
            name=name,
            kind=_kind_seen(holder, deep),
            hfile=hfile,
            hline=holder[3] if holder and holder[1] in ("bank", "slices") else None,
            nfile=filename,
            nline=line,
            rsite=rsite or fsite,
            rfile=(rsite or fsite)[0][0],
            rline=(rsite or fsite)[0][1],
            ffile=fsite[0][0],
            fline=fsite[0][1],
            kfile=freeing.site[0][0].co_filename,
            kline=freeing.site[0][1],
            sfile=frames[0].f_code.co_filename if frames else None,
            sline=frames[0].f_lineno if frames else None,
            sframes=[(frame.f_code.co_filename, frame.f_lineno) for frame in frames],
            cached=_cached_around(call.site) if call else None,
            again=rsite[:1] == fsite[:1],
            free_kind=freeing.kind,
            raise_kind=call.kind if call else None,
            grads=freeing.kind == "grad" and _loss_uses(freeing, call),
            between=between,
            summed=summed,
            summed_nodes=_accumulations(rsite or fsite, summed[0]) if summed else [],
            reads_grad=bool(name and (_grad_reads(hfile, name) or _grad_of(hfile, name))),
            bare=name and sub == "rnn" and _bare_detach(hfile, name),
            special=special,
            stepped=bool(self.rec.step_hook) and self._stepped_since(freeing.number),
            optimizers=bool(self.rec.steps) or bool(self._optimizers()),
            closest=self._closest(node, frames) if cause == "shared-forward" else None,
            deep=deep,
            tuples=tuples,
            beside=beside,
            states=states,
            in_init=in_init,
            root=next((n for n, _, _ in self._root_names(call, frames)), None) if call else None,
            graphs={
                name
                for frame in frames
                for name, value in list(frame.f_locals.items())
                if isinstance(value, torch.Tensor) and value.grad_fn is not None
            },
        )

    def _deep(self, node, frames, limit=3000):
        """Paths, from names the reader's frames hold, of tensors kept on objects (attributes
        of modules and objects, items of their lists and dicts, a few levels down) whose graph
        reaches the node: `model.attn.cache_k`, `model.style_loss_1.target`; and the paths of the
        tuples of tensors on the way (`model.cell.state` of an LSTM's (h, c)); and the paths of
        every tensor with a graph kept beside a found one on its object (`model.attn.z`)."""
        level = [
            (name, value)
            for frame in frames
            for scope in (frame.f_locals, frame.f_globals)
            for name, value in list(scope.items())
            if not isinstance(value, (type, types.ModuleType, types.FunctionType))
        ]
        found, tuples, objects = _walk(level, node, limit)
        if frames and frames[0].f_locals is not frames[0].f_globals:
            # Named from the raising call's own frame where that reaches the same object
            # (`self.model.rep` in a trainer's method, not the module's `rep`): a fix placed
            # after that call reads it there.
            _, _, local = _walk(list(frames[0].f_locals.items()), None, limit)
            ids = {}
            for path, value in local.items():
                ids.setdefault(id(value), path)
            found, tuples = ([_named_from(p, objects, ids) for p in ps] for ps in (found, tuples))
            objects = {_named_from(p, objects, ids): v for p, v in objects.items()}
        owners = [
            owner
            for owner in dict.fromkeys(p.rsplit(".", 1)[0] for p in found if "." in p)
            if owner in objects
        ]
        beside = [
            near
            for owner in owners
            for near, value in _members(owner, objects[owner])
            if isinstance(value, torch.Tensor) and value.grad_fn is not None
        ]
        # Objects of the reader's own classes that the owners are instances of (a spiking layer
        # beside the one found): each keeps its own state, which the next step reads too.
        kinds = {type(objects[o]) for o in owners if _readers_class(objects[o])}
        alike = [p for p, v in objects.items() if type(v) in kinds and p not in owners][:16]
        states = [s for o in owners + alike for s in _states(o, objects[o])]
        return found, tuples, beside, states

    def _closest(self, node, frames):
        """The name in the reader's frames whose tensor's graph reaches the node soonest."""
        best = None
        for order, frame in enumerate(frames):
            for name, value in frame.f_locals.items():
                grad_fn = value.grad_fn if isinstance(value, torch.Tensor) else None
                depth = _depth(grad_fn, node, 64) if grad_fn is not None else None
                if depth is not None and (best is None or (depth, order) < best[:2]):
                    best = (depth, order, name)
        return best[2] if best else None

    def _shown_fixes(self, fixes):
        """The candidates with each file named as the reader gave it, and their diffs."""
        for fix in fixes:
            fix["diff"] = _diff(fix["edits"], self.rec.show)
            for edit in fix["edits"]:
                edit["file"] = self.rec.show(edit["file"])
        return fixes


def _say_twice(w):
    """The sentence for the same loss gone back through twice."""
    raised, first, again, built, closure = w.raised, w.first, w.again, w.built, w.closure
    freeing, call, between, show = w.freeing, w.call, w.between, w.show
    if again and freeing.kind == "backward":
        where = (
            "LBFGS runs the closure several times a step: build the loss inside the closure"
            if closure
            else "call backward on it once, before that loop (stepping each optimizer in the loop),"
            " or build the loss inside the loop"
        )
        runs = "it runs" if closure else "the loop around it runs"
        return (
            f"The loss built at {built} goes back through the call at {raised} each time {runs};"
            f" {where}, so that each call goes back once through a graph of its own."
        )
    if freeing.kind == "grad":
        return (
            f"Pass retain_graph=True to the torch.autograd.grad call at {first}, so the call at {raised}"
            " can go through the same graph again."
        )
    if between and between[0] == "summed":
        total, added = between[1]
        added = added if re.fullmatch(r"[\w.]+", added) else f"({added})"
        return (
            f"`{total}` adds up losses the call at {first} already went back through once: keep it"
            f" without their graphs (`{total} += {added}.detach()`, or `.item()`) and remove the"
            f" call at {raised}, which would only add those losses' gradients again."
        )
    gate = call is not None and _ifs(call.site) - _ifs(freeing.site)
    if gate:  # the second call runs only sometimes (a logging helper every k steps)
        return (
            f"Call backward once on this loss: the call at {raised} runs only when the `if` at"
            f" {show(max(gate)[0])}:{max(gate)[1]} holds, after the call at {first} went back"
            f" through it: remove it (the gradients the call at {first} left are there to read)."
        )
    return (
        f"Call backward once on this loss: remove the call at {raised} or the one at {first} (a second "
        "call would add the same gradients again)."
    )


def _say_carried_special(w):
    """The sentence for a carried state that a pattern around it explains, or None."""
    raised, built, name, var, pair, sub = w.raised, w.built, w.name, w.var, w.pair, w.sub
    holder, call, show = w.holder, w.call, w.show
    if sub == "ema":
        return (
            f"The parameters of {var} are updated in place at {built} with autograd on, so each"
            " update adds to a graph that reaches back through the updates before it, which"
            f" earlier calls freed, and the call at {raised} goes back into it: make the update"
            f" under `with torch.no_grad():` (and use {var} under `torch.no_grad()` too, if"
            " nothing should train through it)."
        )
    cached = call is not None and _cached_around(call.site)
    if cached:
        return (
            f"`{cached[2]}` at {show(cached[0])}:{cached[1]} keeps the weight a parametrization"
            " computed on its first use, with that step's graph, for every step of the loop inside"
            f" it, so the call at {raised} goes back into the first step's graph (and the weight"
            " no longer follows the optimizer): enter it inside the loop, around one step's"
            " forward pass, so that each step computes the weight again."
        )
    window = sub in ("rnn", "lstm", "lstm-both") and call and _window(call.site, name)
    if window:
        file, start, outer, inner = window[0], *window[1:]
        at = show(file) + ":"
        return (
            f"{var} starts afresh at {at}{start} in each pass of the loop at {at}{outer} and"
            f" carries its graph through the loop at {at}{inner}, whose call at {raised} goes"
            " back into the passes before it: add up that loop's losses and call backward (and"
            f" step) once after it. Detaching {var} after each call also runs, but then each"
            f" later loss no longer reaches the pass at {at}{start}."
        )
    read = sub == "rnn" and holder and _grad_reads(holder[2], name)
    if read:
        kept = f" (in place of `{name}.retain_grad()`)" if "retain_grad" in read else ""
        return (
            f"{var} (built at {built}) is carried into the next step with the graph of its"
            f" update, and the loop reads its `.grad`: start each step from a fresh leaf,"
            f" `{name} = {name}.detach().requires_grad_()` after that update{kept},"
            " or update it in place under `with torch.no_grad():`,"
            f" so the call at {raised} goes back through this step only and still fills"
            f" `{name}.grad`."
        )
    bare = holder and _bare_detach(holder[2], name)
    if sub == "rnn" and bare:
        return (
            f"`{name}.detach()` at {show(holder[2])}:{bare} returns a detached copy and changes"
            f" nothing: assign it (`{name} = {name}.detach()`), so the call at {raised} goes back"
            " through this step only."
        )
    gated = sub in ("rnn", "lstm", "lstm-both") and holder and _gated_detach(holder[2], name)
    if gated:
        detached = f"{name} = " + (pair if sub.startswith("lstm") else f"{name}.detach()")
        return (
            f"{var} is detached at {show(holder[2])}:{gated} only when the `if` around it"
            f" holds, and the call at {raised} ran in a step where it did not, so it went back into"
            " a graph an earlier call had freed. To keep gradients across that window (truncated"
            " BPTT over k chunks), add up the losses and call backward (and step) once per window,"
            f" just before that detach; otherwise detach it after every call: `{detached}`."
        )
    if sub == "bank" and holder[2]:
        stored = [
            n
            for n in ast.walk(_parse(holder[2]))
            if isinstance(n, ast.Assign) and n.lineno == holder[3]
        ]
        text = "".join(linecache.getlines(holder[2]))
        target = ast.get_source_segment(text, stored[0].targets[0]) if stored else None
        value = ast.get_source_segment(text, stored[0].value) if stored else None
        if target and value:
            value = value if re.fullmatch(r"[\w.]+", value) else f"({value})"
            return (
                f"{var} keeps tensors from earlier steps (built at {built}) with their graphs,"
                f" written in at {show(holder[2])}:{holder[3]}: store detached copies there"
                f" (`{target} = {value}.detach()`), so later steps read the values without graphs"
                " an earlier call freed."
            )
    return None


def _say_carried(w):
    """The sentence for state carried into the next step."""
    raised, first, built, name, var, pair = w.raised, w.first, w.built, w.name, w.var, w.pair
    sub = w.sub
    special = _say_carried_special(w)
    if special is not None:
        return special
    written = w.sub == "slices" and f"{w.show(w.holder[2])}:{w.holder[3]}"
    return {
        "total": f"{var} adds each step's graph to the next: add `loss.item()` to it and call backward on this step's loss at {raised}.",
        "loss": f"{var} keeps the loss of an earlier step (built at {built}) with its graph: keep `loss.item()` (or `loss.detach()`) in it instead, so the call at {raised} goes back through this step only.",
        "accumulator": f"{var} still holds the loss the call at {first} went through: start a fresh accumulator (`{name} = 0`) before each pass.",
        "kept": f"{var} keeps tensors from earlier steps (built at {built}) with their graphs: store `x.detach()` in it, or clear it each step.",
        "clear": f"{var} keeps tensors (built at {built}) whose graphs an earlier call went through: clear it after each update (`{name}.clear()`).",
        "store": f"{var} is read again in later steps (sampled, or cut to its last items) and keeps tensors (built at {built}) whose graphs an earlier call went through: add detached values to it (`x.detach()`) if nothing should train through them, or compute what is read from it again in each step; emptying it would lose what it keeps.",
        "attr": f"{var} keeps a tensor (built at {built}) whose graph the call at {first} went through: read it as `{name}.detach()` where it is used again, or store a detached copy in it if nothing before that call needs its graph.",
        "lstm": f"Detach both tensors of {var} after the call at {raised}: `{name} = {pair}`.",
        "before": f"{var} is built at {built} before the loop from parameters the optimizer trains: compute it inside the loop, in each step before the call at {raised}, so they keep training (or, if it is a target they must not learn from, build it under `with torch.no_grad():`).",
        "target": f"{var} is built at {built} before the loop from parameters that this step trains again through a forward pass of its own, so it is a target of the update (an advantage, a TD target): take its values, `{name} = {name}.detach()` after it is built (or build it under `with torch.no_grad():`), so that the call at {raised} goes back through this step only.",
        "frozen": f"{var} (built at {built}) goes back to parameters this loop does not train: use `{name}.detach()` (or build it under `with torch.no_grad():`).",
        "slices": f"{var} is written in place at {written} and kept across steps, so this step's graph runs back through the earlier steps' writes: start each step from a detached copy (`{name} = {name}.detach()`, before the writes) or a fresh tensor (`torch.zeros_like({name})`).",
        "rnn": f"Detach {var} after each step, `{name} = {name}.detach()` after the call at {raised}, so that call goes back through one step.",
    }[sub.replace("-both", "").replace("bank", "kept")]


def _say_grad(w):
    """The sentence for two torch.autograd.grad calls, or one and a backward, on one pass."""
    raised, first, freeing, call = w.raised, w.first, w.freeing, w.call
    both = call is not None and call.kind == "grad"
    if both and _loss_uses(freeing, call):
        return (
            f"Pass create_graph=True to both torch.autograd.grad calls, at {first} and {raised}, or take"
            " both in one call (`torch.autograd.grad(y, [a, b], create_graph=True)`): a loss uses their results."
        )
    if both:
        return (
            "Take both gradients in one call (`torch.autograd.grad(y, [a, b])`), or pass"
            f" retain_graph=True to the call at {first}."
        )
    if _loss_uses(freeing, call):
        return (
            f"Pass create_graph=True to the torch.autograd.grad call at {first}: the loss at"
            f" {raised} uses its result, and create_graph=True keeps the graph and makes that"
            " term differentiable."
        )
    return (
        f"Pass retain_graph=True to the torch.autograd.grad call at {first}, which otherwise"
        f" frees the graph the call at {raised} still needs."
    )


def _loss_uses(freeing, call):
    """Whether a loss uses the result of the autograd.grad call that freed the graph: it is
    still held, and where a backward call raised (its loss is whole by then) in the same file,
    read after the first call and by the time of the backward (a gradient penalty), not only
    after it (a projection of `.grad`). A second autograd.grad's loss may come later."""
    held = any(ref() is not None for ref in freeing.results)
    if call is None or call.kind != "backward" or not freeing.site or not call.site:
        return held
    (first, fline), (second, rline) = freeing.site[0], call.site[0]
    filename = first.co_filename
    if filename != second.co_filename or rline <= fline:
        return held  # in another file, or in a later pass of a loop: no order to read
    statement, _ = _stmt(filename, fline)
    names = {x for t in getattr(statement, "targets", []) for x, _ in _names(t, ast.Store)}
    if not names:
        return held
    # A result no longer held may live on in what the line made of it (`forces =
    # -grad(e.sum(), x)[0]`), not where the line took its value out (`.item()`, `.detach()`).
    taken = {"item", "detach", "tolist", "numpy"}
    if not held and any(getattr(n, "attr", None) in taken for n in ast.walk(statement)):
        return False
    end = _stmt(filename, rline)[0].end_lineno
    return any(
        isinstance(n, ast.Name) and n.id in names and statement.end_lineno < n.lineno <= end
        for n in ast.walk(_parse(filename))
        if isinstance(getattr(n, "ctx", None), ast.Load)
    )


def _say_shared(w):
    """The sentence for two losses on one forward pass."""
    raised, first, again, built, var = w.raised, w.first, w.again, w.built, w.var
    freeing, retained, call, trained = w.freeing, w.retained, w.call, w.trained
    between, show = w.between, w.show
    if w.sub == "grad":
        return _say_grad(w)
    if _grad_of_a_part(call, freeing) and not trained:
        return (
            f"The torch.autograd.grad call at {raised} takes gradients of a part of the loss the"
            f" call at {first} already went back through, and nothing steps between them: pass"
            f" retain_graph=True to the call at {first}, or take these gradients first (with"
            " retain_graph=True) and call backward last."
        )
    if call is not None and freeing.number > call.number:  # run from a hook inside it
        return (
            f"The call at {first} runs inside the call at {raised}, from a hook, and frees the graph"
            f" that call is still going back through: pass retain_graph=True to the call at {first},"
            " or take the hook's gradient with torch.autograd.grad and call backward once on the sum"
            " of both losses."
        )
    if w.step_hook and w.stepped_since(freeing.number) and not trained:
        between = f"two runs of {raised}" if again else f"the calls at {first} and {raised}"
        return (
            f"An optimizer that does not train the forward pass at {built} stepped between {between}"
            " (a GAN's discriminator or critic step): give that step the pass's output detached"
            " (fake.detach())."
        )
    if between and between[0] == "again" and not again:
        return (
            f"An optimizer stepped between the calls at {first} and {raised} and changed parameters"
            f" of the forward pass at {built}, which the second loss trains too: after the step, compute"
            f" {var} again, and the second loss from it, before the call at {raised}, so that call"
            " goes back through a pass of its own, built from the weights as they are now (retain_graph=True on the first call runs"
            " only while that pass saved none of the parameters the step changed)."
        )
    if between and between[0] == "one":
        return (
            f"One optimizer trains what both losses reach, and it stepped between the calls at"
            f" {first} and {raised}, changing parameters of the forward pass at {built} that both go"
            " back through: add the losses and call backward once, then step once; to keep two"
            f" updates, compute {var} again after the step, for the second loss (with"
            " retain_graph=True on the first call, the second would find those parameters changed"
            " in place instead)."
        )
    if between and between[0] == "detach":
        used, where = between[1][0], f"{show(between[1][1])}:{between[1][2]}"
        return (
            f"The loss built at {where} reaches, through `{used}`, parameters of the forward pass at"
            f" {built} that only the optimizer stepped after the call at {first} trains. If that"
            " loss should not train through them (an actor's loss through the critic's value), use"
            f" `{used}.detach()` there and, as both losses may still share layers before it, add"
            " them and call backward once, then step each optimizer. If it should (a generator's"
            f" loss through the discriminator), compute `{used}` again after that step, and give the"
            " first loss its input detached (fake.detach()) where it should not reach the pass"
            " before."
        )
    if again:
        # Not if a step between changed what the pass saved: that is the in-place error.
        keep = (
            "" if retained or trained else ", or pass retain_graph=True to every call but the last"
        )
        return (
            f"The call at {raised} runs more than once through the forward pass at {built}, which ran"
            f" once: add the losses and call backward once{keep}."
        )
    keep = "" if retained or trained else ", or pass retain_graph=True to the first call"
    return (
        f"The calls at {first} and {raised} both go back through the forward pass at {built}: add the "
        f"losses and call backward once{keep}; if the first loss should not reach that pass (a GAN's "
        "discriminator step), detach its input there (fake.detach())."
    )


def _say_saved(w):
    """The sentence for a saved tensor read after the call that freed it."""
    return (
        f"Read the saved tensors before the call at {w.first} frees them, or keep the tensors you "
        "need in your own variables; pass retain_graph=True to that call only if you must "
        "read them after it."
    )


_SAY = {
    "same-loss-twice": _say_twice,
    "carried-state": _say_carried,
    "shared-forward": _say_shared,
}


_PACK = _Recorder._pack.__code__


def _kind(value):
    if isinstance(value, torch.Tensor):
        return "tensor", [value]
    if isinstance(value, tuple):
        return "tuple", [t for t in value if isinstance(t, torch.Tensor)]
    if isinstance(value, (list, collections.deque, dict)):
        kind = "list" if isinstance(value, list) else "bank"
        values = value.values() if isinstance(value, dict) else value
        items = [t for v in values for t in (v if isinstance(v, tuple) else (v,))]
        return kind, [t for t in items if isinstance(t, torch.Tensor)]
    return None, []


def _trained(node, steps, since):
    # The optimizers that stepped since `since`, as the step hook saw them; without that hook
    # (torch before 2.0), every optimizer alive, found by a scan of every object.
    if steps is None:
        optimizers = [o for o in gc.get_objects() if issubclass(type(o), torch.optim.Optimizer)]
    else:
        optimizers = [ref() for number, ref in steps.values() if number >= since]
    held = {id(p) for o in optimizers if o is not None for g in o.param_groups for p in g["params"]}
    stack, seen = [node], {}
    while stack and len(seen) < SEARCH_LIMIT:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            if id(getattr(node, "variable", None)) in held:
                return True
            stack.extend(_children(node))
    return False


def _params(roots, stop=None, limit=WALK_LIMIT):
    """The ids of the parameters below the roots, not going below `stop`."""
    found, stack, seen = set(), list(roots), {}
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is stop or id(node) in seen:
            continue
        seen[id(node)] = node
        variable = getattr(node, "variable", None)
        if variable is not None:
            found.add(id(variable))
        else:
            stack.extend(_children(node))
    return found


def _predicts(roots, node, limit=64):
    # Whether a loss reaches the node through no layer of its own: the node is its prediction
    # (a critic's value), not a feature that it, too, goes on from (an encoder's code).
    stack, seen = list(roots), set()
    while stack and len(seen) < limit:
        here = stack.pop()
        if here is node:
            return True
        children = _children(here)
        if id(here) not in seen and not any(hasattr(c, "variable") for c in children):
            seen.add(id(here))
            stack.extend(children)
    return False


def _own_params(node, limit=32):
    """The ids of the parameters a node uses itself: leaves below it through chains of one
    child (a Linear's weight through its transpose), not those of the layers before it; below
    an activation (one child, no parameter), those of the layer under it."""
    while len(_children(node)) == 1 and not hasattr(_children(node)[0], "variable") and limit:
        node, limit = _children(node)[0], limit - 1
    found, stack = set(), list(_children(node))
    while stack and limit:
        limit -= 1
        child = stack.pop()
        variable = getattr(child, "variable", None)
        if variable is not None:
            found.add(id(variable))
        elif len(_children(child)) == 1:
            stack.extend(_children(child))
    return found


def _grad_reads(filename, name):
    # Which of name.grad and name.retain_grad() the file uses: after a bare detach, name would
    # no longer require grad, and its .grad would stay None.
    text = "".join(linecache.getlines(filename)) if filename else ""
    return set(re.findall(rf"(?<![\w.]){re.escape(name)}\.(grad\b|retain_grad(?=\())", text))


def _grad_of(filename, name):
    # Whether a torch.autograd.grad call takes gradients with respect to `name` (an unrolled
    # optimizer's weights): a state detached for the next step must require grad again.
    for n in ast.walk(_parse(filename)):
        func = getattr(n, "func", None)
        grad = isinstance(n, ast.Call) and getattr(func, "attr", None) == "grad" and n.args[1:]
        if grad and name in {x for x, _ in _names(n.args[1], ast.Load)}:
            return True
    return False


def _target(call, node, name, filename):
    # Whether a node built before the loop is a target of the update, to be taken as values,
    # not a pass to compute again in each step: named as one (PPO's advantages from the critic
    # on the rollout) or given to a loss as its target (soft pseudo-labels), and its parameters
    # trained again by this step's own forward pass (the critic on each minibatch). The name
    # and the loss decide between the two: a flow's log-determinant of a trained weight,
    # cached before the loop, has the same graph and must be computed again in each step.
    named = re.search(r"(?i)adv|target|return|baseline", name.split(".")[-1])
    if not named and not _loss_target(filename, name):
        return False
    under = _params(_children(node))
    return bool(under) and under <= _params(_roots(call), stop=node)


LOSSES = re.compile(r"(?i)loss|criterion|kl_div|entropy|nll|mse|l1|bce|huber|margin")


def _loss_target(filename, name):
    """Whether `name`, or what is computed from it (`pu = pseudo[i:j]`), is given to a loss
    as its target: the second argument, or `target=`, of a call named as a loss."""
    tree, names = _parse(filename), {name}
    for _ in range(3):
        for n in ast.walk(tree):
            if isinstance(n, ast.Assign) and {x for x, _ in _names(n.value, ast.Load)} & names:
                names |= {x for t in n.targets for x, _ in _names(t, ast.Store)}
    for n in ast.walk(tree):
        called = (_dotted(getattr(n, "func", None)) or "").split(".")[-1]
        if not isinstance(n, ast.Call) or not LOSSES.search(called):
            continue
        given = n.args[1:2] + [k.value for k in n.keywords if k.arg == "target"]
        if any({x for x, _ in _names(g, ast.Load)} & names for g in given):
            return True
    return False


def _held(optimizer):
    return {id(p) for g in optimizer.param_groups for p in g["params"]}


def _carried(call, freeing, holder, roots, clock, trained, new, again=False):
    if freeing in roots:
        if call.previous is None:
            return "accumulator"
        return "total" if not holder or _accumulates(holder[2], holder[0]) else "loss"
    kind = holder[1] if holder else "tensor"
    if kind == "slices":
        return kind
    if kind in ("list", "bank"):
        if new:
            return "clear"
        return "kept" if kind == "list" else kind
    if kind == "attr":
        return "before" if clock == 0 and not again and trained else kind
    if kind in ("tuple", "pair"):
        names = "|".join(map(re.escape, holder[0].split(", ")))
        detached = re.compile(r"\b(" + names + r")\b.*=.*detach")
        return (
            "lstm"
            if holder[3] < 2 or any(map(detached.search, linecache.getlines(holder[2])))
            else "lstm-both"
        )
    if clock == 0:
        return "before" if trained else "frozen"
    return "rnn"


def _texts(site):
    return tuple((_source(code.co_filename, line) or "").split("#")[0] for code, line in site)


def _cause(call, freeing, clock, roots, leaves, once=False, direct=False, rebuilt=False):
    if call is None:
        return "saved-read"
    if freeing is None:
        return None
    for ref in call.roots:
        tensor = ref()
        if (
            tensor is not None
            and tensor.grad_fn is not None
            and tensor.grad_fn.metadata.get(ROOT) not in (None, call)
        ):
            return "same-loss-twice"
    part = _picks_a_part(call)  # `losses[i]`: another part of one output each call, not one loss
    if direct and leaves < 2 and freeing.kind == "backward" == call.kind and not part:
        return "same-loss-twice"  # a new root over the old loss alone, such as scaler.scale(loss)
    if (
        call.fresh
        and not once
        and (
            (call.previous is not None and (clock is None or clock < call.previous))
            or (call.site != freeing.site and _texts(call.site) == _texts(freeing.site))
            or rebuilt
        )
    ):
        return "carried-state"
    if freeing.kind == "backward" and freeing in roots and leaves:
        return "carried-state"
    if (
        freeing.kind == "backward"
        and not leaves
        and not _grad_of_a_part(call, freeing)
        and not part
    ):
        return "same-loss-twice"
    return "shared-forward"


PARTS = ("SelectBackward", "IndexBackward", "SliceBackward", "UnbindBackward", "SplitBackward")


def _picks_a_part(call):
    # Whether the call goes back from an element or slice of a tensor of several values.
    for ref in call.roots:
        tensor = ref()
        node = tensor.grad_fn if tensor is not None else None
        if node is not None and node.name().startswith(PARTS):
            sizes = getattr(node, "_saved_self_sym_sizes", getattr(node, "_saved_self_sizes", None))
            # Unbind keeps no sizes: always a part.
            if sizes is None or tensor.numel() < math.prod(int(n) for n in sizes):
                return True
    return False


def _grad_of_a_part(call, freeing):
    # torch.autograd.grad of another tensor than the backward's (one task's loss of the sum it
    # went back through): gradients taken apart, which add nothing to .grad.
    mine = [r() for r in call.roots]
    return call.kind == "grad" and not any(
        r() is t for r in freeing.roots for t in mine if t is not None
    )


def _safe_to_get(value):
    return isinstance(value, (torch.Tensor, type, types.ModuleType, _Node))


def _node_of(value):
    if isinstance(value, torch.Tensor):
        return value.grad_fn
    if isinstance(value, _Node):
        return value
    return None


def _where(place):
    if str(place["file"]).startswith("In ["):
        return "{}, line {}".format(place["file"], place["line"])
    return "{}:{}".format(place["file"], place["line"])


def _cell(filename):
    found = re.match(r"<ipython-input-(\d+)-", filename)
    if found:
        return f"In [{found.group(1)}]"
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    number = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename)
    return f"In [{number}]" if number is not None else None


# Fixes as edits ---------------------------------------------------------------------------
# A fix is data: edits of the reader's files (first and last line replaced by new text; an
# insertion has last = first - 1), an applicability ("machine": the edit alone is the fix;
# "manual": it needs the reader's choice), one sentence of why, and how a try went. Each kind
# of edit below is one small function of the run's facts; the sentence is written from it.


class _Facts(types.SimpleNamespace):
    """What the run saw, as the fix candidates read it."""


def _stmt(filename, line):
    """The innermost statement around the line, and the block that holds it."""
    found = [
        (n.end_lineno - n.lineno, n, block)
        for parent in ast.walk(_parse(filename))
        for field in ("body", "orelse", "finalbody")
        for block in [getattr(parent, field, None)]
        if isinstance(block, list)
        for n in block
        if isinstance(n, ast.stmt) and n.lineno <= line <= n.end_lineno
    ]
    if not found:
        return None, None
    _, n, block = min(found, key=lambda item: item[0])
    return n, block


def _indent(filename, line):
    raw = linecache.getline(filename, line)
    return raw[: len(raw) - len(raw.lstrip())]


def _edit(filename, start, end, new):
    return {"file": filename, "start": start, "end": end, "new": new}


def _insert_after(filename, line, text):
    n, _ = _stmt(filename, line)
    if n is None:
        return None
    pad = _indent(filename, n.lineno)
    new = "".join(pad + t + "\n" for t in text)
    if "".join(linecache.getlines(filename)[n.end_lineno : n.end_lineno + len(text)]) == new:
        return None  # what follows already does it
    return _edit(filename, n.end_lineno + 1, n.end_lineno, new)


def _insert_before(filename, line, text):
    n, _ = _stmt(filename, line)
    if n is None:
        return None
    pad = _indent(filename, n.lineno)
    return _edit(filename, n.lineno, n.lineno - 1, "".join(pad + t + "\n" for t in text))


def _delete(filename, line):
    n, block = _stmt(filename, line)
    if n is None:
        return None
    new = _indent(filename, n.lineno) + "pass\n" if len(block) == 1 else ""
    return _edit(filename, n.lineno, n.end_lineno, new)


def _splice(filename, node, text):
    # Replace one expression's source by text, keeping the rest of its lines.
    lines = linecache.getlines(filename)[node.lineno - 1 : node.end_lineno]
    head = "".join(lines[:-1]).encode()
    block = "".join(lines).encode()
    start, end = node.col_offset, len(head) + node.end_col_offset
    new = block[:start] + text.encode() + block[end:]
    return _edit(filename, node.lineno, node.end_lineno, new.decode())


def _detached(filename, node, method="detach()"):
    if isinstance(node, ast.Tuple) and node.elts:  # each item of a stored tuple
        source = "".join(linecache.getlines(filename))
        items = []
        for e in node.elts:
            text = ast.get_source_segment(source, e) or ""
            items.append(text if _constant(e) else _with(text, e, method))
        return _splice(filename, node, "(" + ", ".join(items) + ")")
    text = ast.get_source_segment("".join(linecache.getlines(filename)), node) or ""
    return _splice(filename, node, _with(text, node, method))


def _each_detached(filename, nodes):
    """One edit a line that detaches each of the names (attributes) read on it."""
    edits = []
    for line in sorted({n.lineno for n in nodes}):
        text = linecache.getline(filename, line).encode()
        for n in sorted((n for n in nodes if n.lineno == line), key=lambda n: -n.col_offset):
            if n.end_lineno == line:
                cut = text[n.col_offset : n.end_col_offset]
                text = text[: n.col_offset] + cut + b".detach()" + text[n.end_col_offset :]
        edits.append(_edit(filename, line, line, text.decode()))
    return edits


def _with(text, node, method):
    simple = isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call))
    return (text if simple else f"({text})") + "." + method


def _keyword(filename, line, name, value="True", call=None):
    # `name=value` on the backward or autograd.grad call at the line (or on `call`).
    for n in [call] if call is not None else ast.walk(_parse(filename)):
        func = getattr(n, "func", None)
        called = getattr(func, "attr", None) or getattr(func, "id", None)
        if not isinstance(n, ast.Call) or n.lineno > line or n.end_lineno < line:
            continue
        if call is None and called not in ("backward", "grad"):
            continue
        for k in n.keywords:
            if k.arg == name:
                return _splice(filename, k.value, value)
        source = "".join(linecache.getlines(filename))
        text = ast.get_source_segment(source, n)
        inner = text[text.index("(", len(ast.get_source_segment(source, func))) + 1 : -1]
        joined = f"{inner.rstrip()}, {name}={value}" if inner.strip() else f"{name}={value}"
        return _splice(filename, n, text[: len(text) - len(inner) - 1] + joined + ")")
    return None


def _accumulations(site, total):
    """(file, node) of what each `total += x` (or `total = total + x`) in the site's files adds."""
    found = []
    for filename in dict.fromkeys(file for file, _ in site):
        for n in ast.walk(_parse(filename)):
            if isinstance(n, ast.AugAssign) and _dotted(n.target) == total:
                found.append((filename, n.value))
            elif (
                isinstance(n, ast.Assign)
                and [_dotted(t) for t in n.targets] == [total]
                and isinstance(n.value, ast.BinOp)
                and _dotted(n.value.left) == total
            ):
                found.append((filename, n.value.right))
    return found


def _diff(edits, show):
    """The edits as a unified diff of the changed lines with a line of context."""
    import difflib

    out = []
    try:
        texts = _edited_sources(edits, linecache.getlines)
    except (OSError, ValueError):
        return ""
    for path, text in texts.items():
        old = linecache.getlines(path)
        name = show(path)
        out += difflib.unified_diff(old, text.splitlines(True), name, name, n=1)
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


def _fix_of(edits, applicability, why):
    edits = [e for e in edits if e is not None]
    if applicability == "machine" and not edits:
        return None
    return {
        "edits": edits,
        "applicability": applicability,
        "why": why,
        "tried": {"outcome": "not tried"},
    }


def _assignments(filename, name):
    # Assignments whose target is `name` (a name or dotted attribute; `self.x` matches `m.x`).
    found = []
    for n in ast.walk(_parse(filename)):
        if isinstance(n, ast.Assign) and len(n.targets) == 1:
            shown = _dotted(n.targets[0])
            if shown and _alike(shown, name):
                found.append(n)
    return sorted(found, key=lambda n: n.lineno)


def _attributes(value):
    # An object's attributes by the names its code reads them by: a module's buffers as
    # `model.memory`, not `model._buffers`.
    attrs = getattr(value, "__dict__", None)
    if not isinstance(attrs, dict):
        return []
    found = list(attrs.items())
    if isinstance(value, torch.nn.Module):
        found = [(a, v) for a, v in found if a != "_buffers"]
        found += [(k, v) for k, v in value._buffers.items() if v is not None]
    return found


def _walk(level, node, limit):
    """Breadth first from `level`'s (name, value) pairs, four levels down: the paths of tensors
    whose graph reaches `node`, of the tuples of tensors on the way, and {path: object}."""
    found, seen, tuples, objects = [], set(), [], {}
    for _ in range(4):
        deeper = []
        for path, value in level:
            if id(value) in seen or len(seen) > limit:
                continue
            seen.add(id(value))
            if isinstance(value, torch.Tensor):
                grad_fn = value.grad_fn
                if (
                    node is not None
                    and "." in path
                    and grad_fn is not None
                    and _depth(grad_fn, node, 200) is not None
                ):
                    found.append(path)
                continue
            if isinstance(value, tuple) and value and len(_kind(value)[1]) == len(value):
                tuples.append(path)  # its items cannot be assigned: it is rebuilt whole
            objects[path] = value
            deeper += _members(path, value)
        level = deeper
    return found, tuples, objects


def _named_from(path, objects, ids):
    """`path` with its longest prefix that names an object in `ids` named as `ids` does."""
    cuts = [i for i, c in enumerate(path) if c in ".["] + [len(path)]
    for i in reversed(cuts):
        value = objects.get(path[:i], objects)
        if value is not objects and id(value) in ids:
            return ids[id(value)] + path[i:]
    return path


def _readers_class(value):
    """Whether the object is an instance of a class of the reader's, not torch's or Python's."""
    module = type(value).__module__ or ""
    return module != "builtins" and module.split(".")[0] != "torch"


def _states(owner, value):
    """What an object keeps that holds a graph at the error, with how each is detached whole: a
    tensor (`model.memory`), a list or tuple of tensors (`model.h_t`, one per layer)."""
    found = []
    for path, kept in _members(owner, value):
        if isinstance(kept, torch.Tensor) and kept.grad_fn is not None:
            found.append((path, f"{path}.detach()"))
            continue
        if not isinstance(kept, (list, tuple)) or not kept:
            continue
        tensors = _kind(kept)[1]
        if len(tensors) == len(kept) and any(t.grad_fn is not None for t in tensors):
            made = (
                "[s.detach() for s in {}]"
                if isinstance(kept, list)
                else "tuple(s.detach() for s in {})"
            )
            found.append((path, made.format(path)))
    return found


def _members(path, value):
    # What an object keeps: its attributes (a module's submodules and buffers among them).
    if isinstance(value, (list, tuple)):
        return [(f"{path}[{i}]", v) for i, v in enumerate(value[:32])]
    if isinstance(value, dict):
        keys = [k for k in list(value)[:32] if isinstance(k, (str, int))]
        return [(f"{path}[{k!r}]", value[k]) for k in keys]
    attrs = getattr(value, "__dict__", None)
    if not isinstance(attrs, dict) or isinstance(value, (type, types.ModuleType, _Node)):
        return []
    found = [(f"{path}.{k}", v) for k, v in list(attrs.items()) if not k.startswith("_")]
    if isinstance(value, torch.nn.Module):
        found += [
            (f"{path}[{k}]" if k.isdigit() else f"{path}.{k}", v) for k, v in value._modules.items()
        ]
        found += [(f"{path}.{k}", v) for k, v in value._buffers.items() if v is not None]
    return found


_LAST_ATTR = r"[\w.\[\]]*\.(\w+)$"  # the attribute a path ends in: `shift` of `model[0].shift`


def _fix_deep(f):
    """A tensor kept on an object, found there: store it detached, or detach it after the step."""
    found = []
    for path in f.deep[:3]:
        attr = re.match(_LAST_ATTR, path)
        if attr is None:
            continue
        why = f"Store `{path}` detached where it is written, if it is a past value read as data."
        found.append(_stored_detached(f, attr.group(1), why))
        why = f"Detach `{path}` once a step's backward is done, so the next step starts from its value."
        found.append(_fix_of(_after_raise(f, [f"{path} = {path}.detach()"]), "machine", why))
    if len(_deep_paths(f)) > 1:  # a pair kept together (a KV cache's keys and values)
        # A tuple's items are not assigned one by one (`state[0] = ...` raises): it is rebuilt.
        paths = list(dict.fromkeys(_tuple_of(p, f.tuples) for p in _deep_paths(f)[:4]))
        made = dict(f.states)  # a list of states (one per layer) is detached item by item
        lines = [
            ", ".join(paths)
            + " = "
            + ", ".join(made.get(p) or _detach_of(p, f.tuples) for p in paths)
        ]
        why = f"Detach {', '.join(f'`{p}`' for p in paths)} once a step's backward is done."
        found.insert(0, _fix_of(_after_raise(f, lines), "machine", why))
    states = [(path, made) for path, made in f.states if path not in _deep_paths(f)]
    if states:  # the object keeps more states than those found (a layer's h beside another's)
        paths = [p for p in _deep_paths(f) if not any(_under(p, s) for s, _ in f.states)]
        held = [(p, _detach_of(p, f.tuples)) for p in paths] + f.states
        lines = [", ".join(p for p, _ in held) + " = " + ", ".join(m for _, m in held)]
        why = (
            f"Detach every state kept with it ({', '.join(f'`{p}`' for p, _ in f.states)}) once"
            " a step's backward is done, if no gradient should cross steps."
        )
        found.append(_fix_of(_after_raise(f, lines), "machine", why))
    kept = [_tuple_of(p, f.tuples) for p in f.deep[:3]] + [p for p, _ in f.states]
    return found + _fix_reset(f, list(dict.fromkeys(kept)))


def _stored_detached(f, attr, why):
    """`self.<attr>` stored detached wherever the script writes it from a computation, whole
    or an item at a time (a replay buffer's row)."""
    own = "self." + attr
    stores = [
        (file, n)
        for file in dict.fromkeys([f.nfile or f.rfile, *(x for x, _ in f.rsite)])
        for n in _assignments(file, own) + _item_stores(file, own)
        if not _fresh(n.value)
    ]
    return _fix_of([_detached(file, n.value) for file, n in stores], "machine", why)


def _under(path, held):
    """Whether `path` is `held` or reached through it (`model.h_t[1]` of `model.h_t`)."""
    return path == held or path.startswith((held + "[", held + "."))


def _tuple_of(path, tuples):
    """`x` for `x[0]` where `x` is a tuple; else the path."""
    base = path.rsplit("[", 1)[0]
    return base if path.endswith("]") and base in tuples else path


def _detach_of(path, tuples):
    return f"tuple(s.detach() for s in {path})" if path in tuples else f"{path}.detach()"


def _fix_reset(f, paths):
    """A state its module starts afresh when it is None (`if self.state is None:`), or that
    `__init__` makes from nothing of its own (`self.hidden = self.init_hidden(B)`): start it so
    after each step, where each batch is a sequence of its own."""
    starts = {}  # attribute: [(path, start)], one fix for the layers that each keep one
    for path in paths:
        attr = re.match(_LAST_ATTR, path)
        if attr is None:
            continue
        owner, name = path.rsplit(".", 1)[0], attr.group(1)
        if _made_in_init(f.hfile, path):
            continue  # computed from the object's parameters: a property, not a fresh start
        start = "None" if _lazy(f.hfile, name) else _initial(f.hfile, name, owner)
        if start is not None:
            starts.setdefault(name, []).append((path, start))
    found = []
    for kept in starts.values():
        how = "None, which its module fills" if kept[0][1] == "None" else "as `__init__` makes it"
        shown = ", ".join(f"`{path}`" for path, _ in kept)
        why = (
            f"Start each step from a fresh {shown} ({how}), if each batch is a sequence of its"
            " own rather than the next part of one stream."
        )
        lines = [f"{path} = {start}" for path, start in kept]
        found.append(_fix_of(_after_raise(f, lines), "machine", why))
    return found


def _initial(filename, attr, owner):
    """`__init__`'s value for `self.<attr>`, with `self.` read on `owner`, where it reads no
    argument or local of `__init__` (a loop far from it has none of those)."""
    if not filename:
        return None
    text = "".join(linecache.getlines(filename))
    for n in ast.walk(_parse(filename)):
        if not isinstance(n, ast.FunctionDef) or n.name != "__init__":
            continue
        own = _init_own(n)
        for m in ast.walk(n):
            if not isinstance(m, ast.Assign) or len(m.targets) != 1:
                continue
            if _dotted(m.targets[0]) != f"self.{attr}":
                continue
            read = {x.id for x in ast.walk(m.value) if isinstance(x, ast.Name)} - {"self"}
            if read & own or isinstance(m.value, ast.Constant):
                return None
            return re.sub(r"\bself\.", owner + ".", ast.get_source_segment(text, m.value))
    return None


def _lazy(filename, attr):
    """Whether the file tests `self.<attr> is None` (a state made when it is missing)."""
    if not filename:
        return False
    for n in ast.walk(_parse(filename)):
        if not isinstance(n, ast.Compare) or len(n.ops) != 1 or not isinstance(n.ops[0], ast.Is):
            continue
        right = n.comparators[0]
        if (
            isinstance(right, ast.Constant)
            and right.value is None
            and _dotted(n.left) == f"self.{attr}"
        ):
            return True
    return False


def _alike(one, other):
    # One holder, named from outside its class (`model.h`, `model.attn.h`) or inside (`self.h`).
    if one.startswith("self.") and "." not in one[5:]:
        one, other = other, one
    if other.startswith("self.") and "." not in other[5:]:
        return one == other or one.endswith("." + other[5:])
    return one == other


def _appends(filename, name):
    for n in ast.walk(_parse(filename)):
        func = getattr(n, "func", None)
        if isinstance(n, ast.Call) and getattr(func, "attr", None) in ("append", "appendleft"):
            shown = _dotted(func.value)
            if shown and _alike(shown, name) and len(n.args) == 1:
                yield n


def _state_lines(f):
    names = f.name.split(", ")
    if len(names) == 1 and (f.kind in ("tuple", "pair") or f.sub.startswith("lstm")):
        return [f"{f.name} = tuple(s.detach() for s in {f.name})"]
    names += _siblings(f) if len(names) == 1 else []
    return [", ".join(names) + " = " + ", ".join(n + ".detach()" for n in names)]


def _siblings(f):
    """The other states the function that updates `self.x` updates from themselves in the same
    way (`self.z = self.z + k` beside `self.kv = self.kv + outer(k, v)`): they carry too, and a
    detach of one leaves the next step to raise on the other."""
    if not f.name.startswith("self.") or not f.nfile or not f.nline:
        return []
    tree = _parse(f.nfile)
    scope = _scope(tree, f.nline)
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    found = []
    for n in ast.walk(scope):
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        name = _dotted(n.targets[0]) or ""
        reads = {_dotted(x) for x in ast.walk(n.value) if isinstance(x, ast.Attribute)}
        if name.startswith("self.") and "." not in name[5:] and name != f.name and name in reads:
            found.append(name)
    # Only those that hold a graph at the error (never a step counter `self.n = self.n + 1`).
    held = {p.rsplit(".", 1)[-1] for p in f.beside}
    return [n for n in dict.fromkeys(found) if n[5:] in held]


def _after_raise(f, lines):
    # After the raising call, in the frame of the state's own file where there is one; `self.x`
    # there is the path the frames reach it by (`model.attn.x`).
    sites = [s for s in f.rsite if s[0] == f.hfile] or f.rsite[:1]
    for path in _deep_paths(f):
        attr = path.rsplit(".", 1)[-1]
        lines = [re.sub(rf"\bself\.{attr}\b", path, t) for t in lines]
        if f"self.{attr}" == f.name and "." in path:  # its siblings on the same object
            owner = path.rsplit(".", 1)[0]
            lines = [re.sub(r"\bself\.(\w+)\b", rf"{owner}.\1", t) for t in lines]
    roots = {x.id for n in ast.parse("\n".join(lines)).body for x in _written(n)}
    sites = [s for s in sites if all(_binds(*s, name) for name in roots)]  # never a stray name
    # The innermost that a loop holds: a helper's per-batch loop, not the epoch loop calling it.
    sites = [s for s in sites if _loops(*s)][:1] or sites[-1:]
    return [_insert_after(file, line, lines) for file, line in sites] or [None]


def _written(n):
    # The names a statement to insert writes through: `h` of `h = h.detach()`, `model` of
    # `model.enc.h = ...`, `buf` of `buf.clear()`.
    for t in getattr(n, "targets", None) or [n.value]:
        yield from (x for x in ast.walk(t) if isinstance(x, ast.Name))


def _binds(filename, line, name):
    # Whether the function around the line (else the module) has `name`: an argument, or
    # assigned in it; a statement placed there may read it.
    scope = _scope(_parse(filename), line)
    args = getattr(scope, "args", None)
    given = (
        [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if args else []
    )
    return any(a is not None and a.arg == name for a in given) or any(
        isinstance(n, ast.Name)
        and n.id == name
        and not isinstance(n.ctx, ast.Load)
        and _scope(scope, n.lineno) is scope
        for n in ast.walk(scope)
    )


def _kind_seen(holder, deep):
    # The holder's kind; a tuple where the objects hold its items (`model.enc.state[0]`: an
    # LSTM's (h, c) kept on a module), whatever the line that stores it looks like.
    if holder is None:
        return None
    attr = (holder[0] or "").rsplit(".", 1)[-1]
    if attr and any(re.search(rf"\.{attr}\[\d+\]$", p) for p in deep):
        return "tuple"
    return holder[1]


def _deep_paths(f):
    # The kept tensors found, and the holder's `self.x` on the object that keeps them; the
    # items of a tuple kept whole (`x[0]`, `x[1]` of `x`) are `x`.
    paths = list(f.deep)
    if f.name and f.name.startswith("self.") and "." not in f.name[5:] and paths:
        owner = paths[0].rsplit(".", 1)[0]
        if "." in paths[0] and not any(p.endswith("." + f.name[5:]) for p in paths):
            paths.insert(0, owner + "." + f.name[5:])
    return _whole(paths)


def _whole(paths):
    return [
        p for p in dict.fromkeys(paths) if not (p.endswith("]") and p.rsplit("[", 1)[0] in paths)
    ]


def _after_update(f, lines):
    # After the forward line, where it writes the state again (`h = cell(x, h)`).
    n, _ = _stmt(f.nfile, f.nline) if f.nfile and f.nline else (None, None)
    names = set(f.name.split(", "))
    written = {x for t in getattr(n, "targets", ()) for x, _ in _names(t, ast.Store)}
    return [_insert_after(f.nfile, f.nline, lines) if names <= written else None]


def _after_last_write(f, lines):
    # After the state's last assignment in the step, where that follows the backward call
    # (`center = 0.9 * center + 0.1 * out.mean(0)` after the step).
    tree = _parse(f.rfile)
    here, loops = _scope(tree, f.rline), _loops(f.rfile, f.rline)
    later = [
        n
        for n in _assignments(f.rfile, f.name)
        if n.lineno > f.rline
        and _scope(tree, n.lineno) is here
        and _loops(f.rfile, n.lineno) == loops
    ]
    if not later or not loops or _fresh(later[-1].value):  # `h = h.detach()` already
        return [None]
    return [_insert_after(f.rfile, later[-1].lineno, lines)]


def _before_forward(f, lines):
    # Before the pass first reads the state: in a function, its first statement that reads it,
    # or the loop around that (a forward's loop over time steps), where a detach would cut the
    # pass's own steps apart, or what it just computed from this batch, from their graph.
    if not f.nfile or not f.nline:
        return [None]
    first = f.name.split(", ")[0]
    guarded = [f"if {first} is not None:"] + ["    " + t for t in lines]
    scope, line = _scope(_parse(f.nfile), f.nline), f.nline
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        reads = [n for name, n in _names(scope, ast.Load) if name == first]
        line = min([*reads, f.nline])
        loops = _loops(f.nfile, line)
        line = min(loops)[0] if loops else line
    return [_insert_before(f.nfile, line, guarded)]


def _fix_state(f):
    """An RNN-like state carried into the next step: detach it once a step is done."""
    found = []
    if f.bare:
        n, _ = _stmt(f.hfile, f.bare)
        found.append(
            _fix_of(
                [_splice(f.hfile, n, f"{f.name} = {f.name}.detach()")],
                "machine",
                f"`{f.name}.detach()` returns a copy and changes nothing: assign it.",
            )
        )
    lines = _state_lines(f)
    if f.reads_grad:
        fresh = [f"{f.name} = {f.name}.detach().requires_grad_()"]
        why = f"Start each step from a fresh leaf `{f.name}`, whose `.grad` is still filled."
        found.append(_fix_of(_after_update(f, fresh), "machine", why))
        found.append(_fix_of(_after_raise(f, fresh), "machine", why))
    both = " and ".join(f"`{n}`" for n in [f.name, *_siblings(f)][:4])  # `self.kv` and `self.z`
    why = f"Detach {both} after each backward, if no gradient should cross steps."
    last = f"Detach {both} where the step last writes it, if no gradient should cross steps."
    # Written again after the backward (`target = [tau * t + ...]`): a detach before that write
    # leaves the new value's graph to the next step, so the one after it comes first.
    found.append(_fix_of(_after_last_write(f, lines), "machine", last))
    found.append(_fix_of(_after_raise(f, lines), "machine", why))
    if f.nfile == f.rfile and f.nline and f.nline > f.rline:  # updated after the backward
        found.append(_fix_of(_after_update(f, lines), "machine", why))
    if not f.again and f.ffile == f.hfile and not _loops(f.ffile, f.fline):  # a warm-up call
        why = f"Detach `{f.name}` after the call at line {f.fline} too, which freed its graph before the loop."
        found.append(_fix_of([_insert_after(f.ffile, f.fline, lines)], "machine", why))
    if f.name.startswith("self.") or f.nfile != f.rfile:  # out of the loop's reach
        why = f"Detach {both} where the next forward pass reads it, if no gradient should flow across steps."
        found.append(_fix_of(_before_forward(f, lines), "machine", why))
    if "." in f.name and not f.deep:  # kept where the deep walk does not look (`_state`)
        found += _fix_reset(f, [f.name])
    if "." in f.name and not f.again:
        # Freed by another backward call than the one that raised (a shared trunk's LSTM
        # state, for a DQN loss and then an actor's): detached where it is kept, which no
        # detach after one of the calls does. Not where one call frees and raises: a state
        # written several times a step (a stream's chunks) would be cut inside the step.
        attr = f.name.rsplit(".", 1)[-1]
        why = f"Store `{f.name}` detached where it is written, if no gradient should cross from one pass to the next."
        found.append(_stored_detached(f, attr, why))
    beside = _carried_beside(f)
    if beside:  # an image and a latent both fed to the next refinement pass
        names = [f.name, *beside]
        lines = [", ".join(names) + " = " + ", ".join(n + ".detach()" for n in names)]
        shown = ", ".join(f"`{n}`" for n in names)
        why = f"Detach {shown} after each backward: each goes into the next pass with its graph, if no gradient should cross steps."
        found.append(_fix_of(_after_raise(f, lines), "machine", why))
    return found


def _carried_beside(f):
    """The other names the loop around the raising call hands from one pass to the next (read
    before it writes them) that hold a graph at the error: a detach of one leaves the other."""
    if not f.name or not f.name.isidentifier() or not f.rfile:
        return []
    names = _carried_names(f.rfile, f.rline, whole=True)
    return [n for n in names if n != f.name and n in f.graphs][:3]


def _fix_kept(f):
    """A list or bank of old outputs: store them detached, or detach them after the step."""
    edits = [_detached(f.hfile, n.args[0]) for n in _appends(f.hfile, f.name)] if f.hfile else []
    edits += [
        _detached(f.hfile, n.value) for n in _item_stores(f.hfile, f.name) if not _fresh(n.value)
    ]
    if f.sub == "bank" and f.hline:
        n, _ = _stmt(f.hfile, f.hline)
        edits += [_detached(f.hfile, n.value)] if isinstance(n, ast.Assign) else []
    why = (
        f"Store detached values in `{f.name}`, so later steps read them without graphs an "
        "earlier call freed (if nothing should train through the stored values)."
    )
    unique = {json.dumps(e, sort_keys=True): e for e in edits if e}  # the bank's line is one
    found = [_fix_of(list(unique.values()), "machine", why)]
    if f.sub == "kept" and not edits:  # a list built anew each step (`mems = update(mems)`)
        lines = [f"{f.name} = [x.detach() for x in {f.name}]"]
        why = f"Detach the tensors in `{f.name}` once a step's backward is done, if no gradient should cross steps."
        # Built anew after the backward (`queue = (queue + [v])[-3:]`): detach it there first.
        last = f"Detach the tensors in `{f.name}` where the step last builds it, if no gradient should cross steps."
        found.append(_fix_of(_after_last_write(f, lines), "machine", last))
        found.append(_fix_of(_after_raise(f, lines), "machine", why))
    return found


def _item_stores(filename, name):
    """The assignments `name[key] = value` (`self.cache[k]` matches `trainer.cache`)."""
    if not filename:
        return []
    return [
        n
        for n in ast.walk(_parse(filename))
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Subscript)
        and _alike(_dotted(n.targets[0].value) or "", name)
    ]


def _kept_on_purpose(filename, name):
    """Whether the script keeps the list `name` across updates on purpose: it samples from it
    (`random.sample(replay, k)`, `random.choice`) or keeps only its last items (`queue =
    (queue + [v])[-3:]`, `.pop(0)`, `del buf[0]`, a deque with a maxlen). `del buf[:]` empties
    it: the emptying the fix would add, not a bound."""
    if not filename:
        return False

    def named(n):
        return _alike(_dotted(n) or "", name)

    for n in ast.walk(_parse(filename)):
        if isinstance(n, ast.Call):
            called = _dotted(n.func) or ""
            last = called.split(".")[-1]
            if last in ("sample", "choice", "choices") and n.args and named(n.args[0]):
                return True
            if last == "pop" and isinstance(n.func, ast.Attribute) and named(n.func.value):
                return True
        if isinstance(n, ast.Delete) and any(
            isinstance(t, ast.Subscript) and named(t.value) and not _all_of(t.slice)
            for t in n.targets
        ):
            return True
        if not isinstance(n, ast.Assign) or not any(named(t) for t in n.targets):
            continue
        value = n.value
        bounded = isinstance(value, ast.Call) and (_dotted(value.func) or "").endswith("deque")
        bounded = bounded and (
            len(value.args) > 1 or any(k.arg == "maxlen" for k in value.keywords)
        )
        cut = isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice)
        if bounded or (cut and any(named(x) for x in ast.walk(value.value))):
            return True
    return False


def _all_of(index):
    """Whether a subscript's index is `[:]`, the whole list."""
    return isinstance(index, ast.Slice) and not (index.lower or index.upper or index.step)


def _fix_clear(f):
    lines = [f"{f.name}.clear()"]
    return [
        _fix_of(
            _after_raise(f, lines),
            "machine",
            f"Empty `{f.name}` once its losses were gone back through, so the next step starts a list of its own.",
        )
    ]


def _fix_attr(f):
    """A tensor kept on an object: detach it where it is stored, or compute it again."""
    stores = _assignments(f.hfile, f.name) if f.hfile else []
    edits = [_detached(f.hfile, n.value) for n in stores if not _fresh(n.value)]
    reads = _reads_apart(f.hfile, f.name, stores) if stores else []
    why = (
        f"Read `{f.name}` detached where it is used again, apart from where it is stored, if"
        " that use should not train what computed it (a discriminator's step on a stored fake)."
    )
    return [
        _fix_of(
            edits, "machine", f"Store `{f.name}` detached, if it is a past value read as data."
        ),
        _fix_of(_each_detached(f.hfile, reads), "machine", why),
        _fix_of(
            [],
            "manual",
            f"If `{f.name}` comes from weights that train, compute it again in each forward pass instead of keeping it.",
        ),
    ]


def _reads_apart(filename, name, stores):
    """Where the attribute's value is read outside the blocks that store it (not in a test
    like `x is None`, which reads no value)."""
    tree, blocks = _parse(filename), [_stmt(filename, n.lineno)[1] for n in stores]
    tested = {
        id(c)
        for n in ast.walk(tree)
        if isinstance(n, ast.Compare)
        for c in [n.left, *n.comparators]
    }
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and id(n) not in tested
        and _alike(_dotted(n) or "", name)
        and not any(_stmt(filename, n.lineno)[1] is b for b in blocks)
    ]


def _fix_built_before(f):
    """A tensor built before the loop: compute it in each step, or take its values."""
    sites = [site for site in f.rsite if site[0] == f.hfile and _loops(*site)]
    if not f.name or "." in f.name:
        return []
    if not sites:  # steps written out one after the other
        return _fix_detach_target(f) if f.sub in ("frozen", "target") else []
    # The function that holds the name, where it has one (a train_epoch's own loop, not the
    # epoch loop calling it).
    site = ([s for s in sites if _binds(*s, f.name)] or sites)[-1]
    body = _loop_body(*site)
    inner = max(_loops(*site))[0]
    made = [n for n in _assignments(f.hfile, f.name) if n.lineno < inner]
    if not made or body is None:
        return []
    n, name = made[-1], f.name
    # A target is computed again as it was; anything else with what it is computed from, and
    # what adds to it before the loop (`penalty = 0`, then a loop of `penalty += ...`).
    if f.sub in ("frozen", "target"):
        chain = [n]
    else:
        chain = _built_from(f.hfile, n, f.graphs) + _added_before(f.hfile, n, name, inner)
    why = (
        f"Take `{name}`'s values once (`{name}.detach()`): right if it is a target, or if the"
        " weights it comes from should not learn from this loss."
    )
    detach = _fix_of(
        [_insert_after(f.hfile, chain[-1].lineno, [f"{name} = {name}.detach()"])],
        "machine",
        why,
    )
    why = f"Compute `{name}` again in each step, so the weights it comes from keep training through it."
    again = _fix_of([_copied(f.hfile, chain, body.lineno)], "machine", why)
    return [detach, again] if f.sub in ("frozen", "target") else [again, detach]


def _fix_detach_target(f):
    made = [n for n in _assignments(f.hfile, f.name) if n.end_lineno < min(f.fline, f.rline)]
    if not made or f.hfile != f.ffile:
        return []
    why = f"Take `{f.name}`'s values once (`{f.name}.detach()`), if it is a target nothing should train through."
    return [
        _fix_of(
            [_insert_after(f.hfile, made[-1].end_lineno, [f"{f.name} = {f.name}.detach()"])],
            "machine",
            why,
        )
    ]


def _added_before(filename, made, name, before):
    """The statements after `made` in its block, before the line `before`, that add to
    `name` (`name += x`, or a loop of them)."""
    _, block = _stmt(filename, made.lineno)
    return [
        n
        for n in (block[block.index(made) + 1 :] if made in block else [])
        if n.lineno < before
        and any(isinstance(x, ast.AugAssign) and _dotted(x.target) == name for x in ast.walk(n))
    ]


def _built_from(filename, made, graphs):
    """The statements of made's block, up to made, that compute what it reads among the
    tensors with a graph (`tau = log_t.exp()` before `scale = 3 * tau`), and made."""
    _, block = _stmt(filename, made.lineno)
    chain, needed = [made], {x for x, _ in _names(made.value, ast.Load)} & graphs
    for n in reversed(block[: block.index(made)] if made in block else []):
        stores = {x for t in getattr(n, "targets", ()) for x, _ in _names(t, ast.Store)}
        if isinstance(n, ast.Assign) and stores & needed:
            chain.insert(0, n)
            needed = (needed - stores) | ({x for x, _ in _names(n.value, ast.Load)} & graphs)
    return chain


def _fix_property(f):
    """Tensors an object computes once, in `__init__`, from its own parameters: properties
    compute them at each use instead (`self.mask = torch.sigmoid(self.logits)`). The holder,
    and the others of its object that hold a graph at the error (a Hopfield layer's `keys`
    beside its `values`), go together: one left behind raises in the next step."""
    names = [f.name or "", *[p for p in [*f.deep, *f.beside] if re.fullmatch(_HELD, p)]]
    found, named = {}, {}
    for name in names:
        made = _made_in_init(f.hfile, name)
        if made and made[0].lineno not in found:
            found[made[0].lineno], named[made[0].lineno] = made, name
    if not found or len({id(init) for _, init, _ in found.values()}) != 1:
        return None
    init = next(iter(found.values()))[1]
    pad = _indent(f.hfile, init.lineno)
    text = "".join(
        f"\n{pad}@property\n{pad}def {attr}(self):\n{pad}    return {value}\n"
        for _, (n, _, (attr, value)) in sorted(found.items())
    )
    edits = [_delete(f.hfile, line) for line in sorted(found)]
    edits.append(_edit(f.hfile, init.end_lineno + 1, init.end_lineno, text))
    shown = " and ".join(f"`{named[line]}`" for line in sorted(found))
    it, comes = ("them", "they come") if len(found) > 1 else ("it", "it comes")
    why = (
        f"Compute {shown} in each forward pass, as a property, so the parameters {comes} from"
        f" keep training through {it}."
    )
    return _fix_of(edits, "machine", why)


def _init_own(init):
    """The names only `__init__` has: its arguments and what it assigns."""
    arguments = init.args.posonlyargs + init.args.args + init.args.kwonlyargs
    return {a.arg for a in arguments} | {x for x, _ in _names(init, ast.Store)}


_HELD = r"[\w\[\]]+(\.[\w\[\]]+)*\.\w+"  # an attribute held on an object: `model[0].shift`


def _made_in_init(filename, name):
    """(statement, `__init__`, (attribute, value's source)) where `__init__` alone assigns
    `self.<attribute>` of `name` on one line, from the object's own state and nothing only
    `__init__` has; else None."""
    stores = _assignments(filename, name) if filename and re.fullmatch(_HELD, name) else []
    if len(stores) != 1 or stores[0].lineno != stores[0].end_lineno:
        return None
    n, tree, attr = stores[0], _parse(filename), name.rsplit(".", 1)[1]
    init = _scope(tree, n.lineno)
    if (
        getattr(init, "name", None) != "__init__"
        or _dotted(n.targets[0]) != "self." + attr
        or _fresh(n.value)
    ):
        return None
    local = _init_own(init)
    reads = {x for x, _ in _names(n.value, ast.Load) if x}
    own = {x for x in reads if x.startswith("self.")}
    if not own or (reads - own - {"self"}) & local:
        return None  # it reads nothing of the object's, or what only __init__ has
    value = ast.get_source_segment("".join(linecache.getlines(filename)), n.value)
    return n, init, (attr, value)


def _bound_in(scope, name):
    """The assignments in the function (not a function inside it) that bind `name`, alone or
    in a tuple (`logits, loss = model(X, Y)`)."""
    return [
        n
        for n in ast.walk(scope)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and _scope(scope, n.lineno) is scope
        and any(
            isinstance(t, ast.Name) and t.id == name
            for t in ([n.targets[0]] + list(getattr(n.targets[0], "elts", [])))
        )
    ]


def _copied(filename, statements, line, only=None):
    """An edit that runs these statements again just before the line, at its indentation;
    with `only`, a one-line tuple assignment binds that name alone (`logits, _ = ...`)."""
    lines = linecache.getlines(filename)
    pad, text = _indent(filename, line), ""
    for n in statements:
        target = n.targets[0] if isinstance(n, ast.Assign) else None
        elts = getattr(target, "elts", [])
        if only and elts and not any(isinstance(t, ast.Starred) for t in elts):
            names = [only if isinstance(t, ast.Name) and t.id == only else "_" for t in elts]
            value = ast.get_source_segment("".join(lines), n.value)
            text += f"{pad}{', '.join(names)} = {value}\n"
            continue
        old = _indent(filename, n.lineno)
        block = lines[n.lineno - 1 : n.end_lineno]
        text += "".join(pad + t[len(old) :] if t.strip() else t for t in block)
    return _edit(filename, line, line - 1, text)


def _fix_recompute(f):
    """Compute the shared pass again after the step, for the second loss."""
    name, file = f.closest, f.rfile
    if not name or not f.root or file != f.ffile:
        return None
    root = [n for n in _assignments(file, f.root) if n.lineno < f.rline]
    made = [n for n in _assignments(file, name) if n.lineno < f.fline]
    if not root or not made or made[-1].lineno > root[-1].lineno:
        return None
    tree = _parse(file)
    if _scope(tree, made[-1].lineno) is not _scope(tree, root[-1].lineno):
        return None  # its names are another function's
    if root[-1].lineno > f.fline:  # the second loss is computed after the step: before it
        edit = _copied(file, made[-1:], _first_read(file, name, f.fline, root[-1]).lineno)
    else:  # and again, just before its call
        chain = _depending(file, made[-1], root[-1]) or [made[-1], root[-1]]
        edit = _copied(file, chain, _stmt(file, f.rline)[0].lineno)
    why = (
        f"Compute `{name}` again after the step, and the second loss from it, so that loss goes"
        " back through a pass of its own, built from the weights as they are now."
    )
    return _fix_of([edit], "machine", why)


def _first_read(filename, name, after, last):
    """The first statement of `last`'s block after line `after` that reads `name` and that
    `last` computes from (`_, code = D(fake)` before `info = loss(code)`), else `last`."""
    _, block = _stmt(filename, last.lineno)
    needed, first = {x for x, _ in _names(last.value, ast.Load)}, last
    for n in reversed([n for n in block if after < n.lineno < last.lineno]):
        stores = {x for t in getattr(n, "targets", []) for x, _ in _names(t, ast.Store)}
        if isinstance(n, ast.Assign) and stores & needed:
            reads = {x for x, _ in _names(n.value, ast.Load)}
            needed |= reads
            first = n if name in reads else first
    return first


def _depending(filename, made, last):
    """The statements of one block, from `made` to `last`, that compute from what `made`
    assigns (and from what those assign in turn), leaving out calls that go back or step."""
    _, block = _stmt(filename, made.lineno)
    if last not in block:
        return []
    names, chain = {n for n, _ in _names(made.targets[0], ast.Store)}, [made]
    for n in block[block.index(made) + 1 : block.index(last) + 1]:
        calls = {getattr(c.func, "attr", "") for c in ast.walk(n) if isinstance(c, ast.Call)}
        if not isinstance(n, ast.Assign) or calls & {"backward", "step", "grad", "zero_grad"}:
            continue
        if {x for x, _ in _names(n.value, ast.Load)} & names:
            chain.append(n)
            names |= {x for t in n.targets for x, _ in _names(t, ast.Store)}
    if chain[-1] is not last:
        return []
    needed, kept = set(), []
    for n in reversed(chain):  # only what the last one needs
        stores = {x for t in n.targets for x, _ in _names(t, ast.Store)}
        if n is last or stores & needed:
            kept.insert(0, n)
            needed |= {x for x, _ in _names(n.value, ast.Load)}
    return kept if kept[0] is made else []


def _loop_body(filename, line):
    loops = _loops(filename, line)
    if not loops:
        return None
    first = max(loops)[0]
    for n in ast.walk(_parse(filename)):
        if isinstance(n, LOOPS) and n.lineno == first:
            return n.body[0]
    return None


def _fix_ema(f):
    n, block = _stmt(f.nfile, f.nline)
    while n is not None and not isinstance(n, ast.For):
        outer = [
            p
            for p in ast.walk(_parse(f.nfile))
            if isinstance(p, ast.For) and p.lineno < n.lineno <= p.end_lineno
        ]
        n = max(outer, key=lambda p: p.lineno) if outer else None
    if n is None:
        return []
    text = linecache.getlines(f.nfile)[n.lineno - 1 : n.end_lineno]
    pad = _indent(f.nfile, n.lineno)
    new = pad + "with torch.no_grad():\n" + "".join("    " + t if t.strip() else t for t in text)
    return [
        _fix_of(
            [_edit(f.nfile, n.lineno, n.end_lineno, new)],
            "machine",
            "Update the copied weights under `torch.no_grad()`, so the update builds no graph.",
        )
    ]


def _fix_loss_kept(f):
    edits = []
    for n in _assignments(f.hfile, f.name) if f.hfile else []:
        if isinstance(n.value, (ast.Name, ast.Attribute)):
            edits.append(_detached(f.hfile, n.value))
    return [
        _fix_of(
            edits,
            "machine",
            f"Keep `{f.name}` as a value, detached, so the next step goes back through its own loss only.",
        )
    ]


def _fix_total(f):
    """A running total gone back through: go back through the step's own loss instead, and add
    that loss's value to the total (`total = total + loss.detach()`)."""
    _, _, call, name = _backward_at(f.rfile, f.rline)
    adds = _accumulations(f.rsite[:1], f.name) if f.name else []
    if call is None or name != f.name or len(adds) != 1:
        return []
    file, value = adds[0]
    tree = _parse(file)
    if file != f.rfile or _scope(tree, value.lineno) is not _scope(tree, f.rline):
        return []
    if not isinstance(value, ast.Name) or value.lineno == f.rline:
        return []
    why = (
        f"Go back through this step's `{value.id}` and add its value to `{f.name}`, if"
        f" `{f.name}` is a running total kept to report the loss."
    )
    edits = [_detached(file, value), _splice(f.rfile, call.func.value, value.id)]
    return [_fix_of(edits, "machine", why)]


def _fix_accumulator(f):
    """A sum kept across passes: start it afresh in the function that goes back through it,
    before the statement that first adds to it there (`self.loss = 0.0` in a closure); where
    one block goes back through it twice (SAM's two passes), before the second pass adds."""
    return _restart_between(f) + _restart_in_scope(f)


def _restart_between(f):
    statement, block, _, _ = _backward_at(f.rfile, f.rline)
    if f.kfile != f.rfile or block is None or not f.name:
        return []
    adds = {id(value) for at, value in _accumulations([(f.rfile, f.rline)], f.name)}
    first = next(
        (
            n
            for n in block
            if f.kline < n.lineno < statement.lineno and any(id(m) in adds for m in ast.walk(n))
        ),
        None,
    )
    if first is None or not any(n.lineno <= f.kline <= n.end_lineno for n in block):
        return []  # the freeing call is not in the block: no second pass of one step here
    why = f"Start `{f.name}` afresh before the second pass adds to it, so its backward goes through that pass only."
    start = f"{f.name} = {_start_of(f.rfile, f.name)}"
    return [_fix_of([_insert_before(f.rfile, first.lineno, [start])], "machine", why)]


def _start_of(filename, name):
    """What the script starts the sum `name` at, where that is a constant (`0.0`); else 0."""
    starts = [n for n in _assignments(filename, name) if isinstance(n.value, ast.Constant)]
    text = "".join(linecache.getlines(filename))
    return ast.get_source_segment(text, starts[0].value) if starts else "0"


def _restart_in_scope(f):
    file, line = f.kfile, f.kline  # the call that goes back, in the helper it may be in
    tree = _parse(file)
    scope = _scope(tree, line)
    adds = {id(value) for at, value in _accumulations([(file, line)], f.name) if at == file}
    first = next(
        (n for n in scope.body if n.lineno < line and any(id(m) in adds for m in ast.walk(n))),
        None,
    )
    if first is None or scope is tree:
        return []
    why = f"Start `{f.name}` afresh in each pass, before it is added to, so it holds this pass's losses only."
    start = f"{f.name} = {_start_of(file, f.name)}"
    return [_fix_of([_insert_before(file, first.lineno, [start])], "machine", why)]


def _fix_closure(f):
    """A closure (L-BFGS's) goes back through a loss built outside it, once per call: it
    computes the loss itself, from the statements that build it."""
    _, _, _, name = _backward_at(f.kfile, f.kline)
    tree = _parse(f.kfile)
    closure = _scope(tree, f.kline)
    if not name or closure is tree or _assignments_in(closure, name):
        return None
    outer = _scope(tree, closure.lineno)
    made = [
        n
        for n in _assignments(f.kfile, name)
        if n.lineno < closure.lineno and _scope(tree, n.lineno) is outer
    ]
    if not made:
        return None
    chain = _built_from(f.kfile, made[-1], f.graphs)
    why = f"Compute `{name}` inside the closure, so each call of it goes back through a pass of its own."
    return _fix_of([_copied(f.kfile, chain, closure.body[0].lineno)], "machine", why)


def _assignments_in(scope, name):
    return [
        n
        for n in ast.walk(scope)
        if isinstance(n, ast.Assign) and any(_dotted(t) == name for t in n.targets)
    ]


def _fix_split_loop(f):
    """The same loss gone back through once per pass of a loop over optimizers: go back once,
    before the loop, and keep the rest of the loop (zero_grad before, the steps after)."""
    statement, block, call, name = _backward_at(f.kfile, f.kline)
    loops = [
        n
        for n in ast.walk(_parse(f.kfile))
        if isinstance(n, ast.For) and n.body is block and not n.orelse
    ]
    name = name or ""
    if not loops or not call:
        return None
    # A loss the loop's variable picks (`for loss in losses`, `losses[i]`) is another each pass.
    reads = {n.id for n in ast.walk(call.func.value) if isinstance(n, ast.Name)}
    if reads & {x for x, _ in _names(loops[0].target, ast.Store)}:
        return None
    loop, at = loops[0], block.index(statement)
    if _assignments_in(loop, name):
        return None
    lines = linecache.getlines(f.kfile)
    pad, inner = _indent(f.kfile, loop.lineno), _indent(f.kfile, statement.lineno)
    head = "".join(lines[loop.lineno - 1 : loop.body[0].lineno - 1])

    def part(statements):
        text = "".join("".join(lines[n.lineno - 1 : n.end_lineno]) for n in statements)
        return head + text if statements else ""

    once = "".join(
        pad + t[len(inner) :] for t in lines[statement.lineno - 1 : statement.end_lineno]
    )
    new = part(block[:at]) + once + part(block[at + 1 :])
    why = "Go back through the loss once, before the loop over the optimizers; each still steps in it."
    return _fix_of([_edit(f.kfile, loop.lineno, loop.end_lineno, new)], "machine", why)


def _fix_twice(f):
    """The same loss gone back through twice: one call goes."""
    if f.free_kind == "grad":
        return [
            _both_differentiable(f),
            _fix_of(
                [_keyword(f.ffile, f.fline, "retain_graph")],
                "machine",
                "Keep the graph for the second call, which goes back through it again.",
            ),
        ]
    if f.summed:
        total = f.summed[0]
        edits = [_detached(file, n) for file, n in f.summed_nodes] + [_delete(f.rfile, f.rline)]
        return [
            _fix_of(
                edits,
                "machine",
                f"Keep `{total}` without the graphs of losses already gone back through, and drop its backward call.",
            )
        ]
    if f.again:
        return [_fix_closure(f), _fix_split_loop(f)]
    return [
        _fix_kept_grads(f),
        _fix_of(
            [_delete(f.rfile, f.rline)],
            "machine",
            "Remove the second call: the first already put these gradients in `.grad`.",
        ),
        _fix_of(
            [_delete(f.ffile, f.fline)],
            "machine",
            "Remove the first call, if the second is the one that should stay.",
        ),
    ]


def _fix_shared(f):
    """Two losses on one forward pass: the sum of both first, where one optimizer steps both."""
    found = _shared(f)
    return [_fix_sum(f), _fix_sum_calls(f), *found] if f.sub != "grad" else found


def _shared(f):
    if f.again and not f.optimizers:
        # A loop that updates by hand: what looks like one pass may be state cached in its
        # first iteration, which a kept graph would reuse, stale, in every later one.
        return []
    if f.sub == "grad":
        word = "create_graph" if f.grads else "retain_graph"
        return [
            _both_differentiable(f),
            _fix_of(
                [_keyword(f.ffile, f.fline, word)],
                "machine",
                "Keep the graph at the first torch.autograd.grad call"
                + (
                    " and make its result differentiable, as a loss uses it."
                    if f.grads
                    else ", which the second call needs."
                ),
            ),
        ]
    if f.between and f.between[0] == "detach":
        return _fix_value(f)
    if f.stepped and not f.trained and f.closest:
        why = (
            "Keep the graph at the first call for the second: the step between changes none of"
            " the parameters of the pass both go back through."
        )
        return [_fix_detach_input(f), _fix_of([_retain_first(f)], "machine", why)]
    if f.between and f.between[0] in ("again", "one"):
        return [_fix_recompute(f)]
    if f.retained and f.stepped and f.closest:  # the kept graph is stale after the step
        again = _fix_recompute(f)
        why = (
            f"Compute `{f.closest}` again after the step for the second loss, and give the first"
            " pass its input detached where the first loss (a discriminator's) should not reach"
            " what comes before it."
        )
        both = again and _fix_of(
            again["edits"] + _detached_inputs(f.nfile, f.nline), "machine", why
        )
        return [both, again]
    if f.retained or f.trained or f.between:
        return []
    site = (f.rfile, f.rline) if f.again else (f.ffile, f.fline)
    return [
        _fix_of(
            [_keyword(*site, "retain_graph")],
            "machine",
            "Keep the graph at the first call for the second, which goes back through the same pass (adding the losses and calling backward once gives the same gradients).",
        ),
        _retain_but_last(f),
        *_in_loop(f),
    ]


def _in_loop(f):
    """The second call's own loop: keep the graph at both calls, or detach what the loop reads;
    the detach first where the loop's losses take it as their target (a teacher's output)."""
    both, detach = _retain_in_loop(f), _detach_closest(f)
    if both and detach and _loss_target(f.ffile, f.closest):
        return [detach, both]
    return [both, detach]


def _retain_in_loop(f):
    """retain_graph=True on the first call and on the second, where the second runs in a loop
    of its own (a loss per narrower width): each later pass goes back through the first."""
    if f.again or f.rfile != f.ffile or not f.rline:
        return None
    inner = [loop for loop in _loops(f.rfile, f.rline) if not loop[0] <= f.fline <= loop[1]]
    if not inner:
        return None
    why = (
        "Keep the graph at the first call and at the one in the loop after it: each pass of the"
        " loop goes back through the first pass, if its losses should train that pass too."
    )
    edits = [_keyword(f.ffile, f.fline, "retain_graph"), _keyword(f.rfile, f.rline, "retain_graph")]
    return _fix_of(edits, "machine", why)


def _detach_closest(f):
    """The second loss reads the first pass's output as a target (a teacher's output): detach
    it once the first call has gone back through it."""
    if not f.closest or not f.closest.isidentifier() or f.again:
        return None
    if not _binds(f.ffile, f.fline, f.closest):  # a name of another function's frame
        return None
    why = (
        f"Detach `{f.closest}` after the call at line {f.fline}, if the later losses read it as a"
        " target (a teacher's output in distillation) and should not train what made it."
    )
    return _fix_of(
        [_insert_after(f.ffile, f.fline, [f"{f.closest} = {f.closest}.detach()"])], "machine", why
    )


def _retain_but_last(f):
    """retain_graph=True on every backward call of the freeing call's block but the last, where
    it holds three or more (a third loss on the same pass)."""
    statement, block, _, _ = _backward_at(f.ffile, f.fline)
    if block is None or f.again:
        return None
    calls = [n for n in block[block.index(statement) :] if _called(n, "backward")]
    if f.rfile != f.ffile or not any(n.lineno <= f.rline <= n.end_lineno for n in calls):
        return None
    if len(calls) < 3 or any(k.arg == "retain_graph" for n in calls for k in n.value.keywords):
        return None
    why = "Keep the graph at every call but the last: each later loss goes back through the same pass."
    return _fix_of(
        [_keyword(f.ffile, n.lineno, "retain_graph") for n in calls[:-1]], "machine", why
    )


def _fix_kept_grads(f):
    """The second call removed with the zero_grad() calls between the two, which cleared what
    the first put in `.grad` for a later step (a second optimizer's)."""
    both = _one_block(f)
    if both is None:
        return None
    block, start, end = both
    zeroing = [n for n in block[start + 1 : end] if _called(n, "zero_grad")]
    if not zeroing:
        return None
    edits = [_delete(f.rfile, n.lineno) for n in [*zeroing, block[end]]]
    why = (
        "Remove the second call and the zero_grad() between the two: the first call's"
        " gradients then stay in `.grad` for every optimizer that steps after it."
    )
    return _fix_of(edits, "machine", why)


def _one_block(f):
    """(block, index of the freeing call, index of the raising one) where both are statements
    of one block, the freeing one first; None otherwise."""
    first, block = _stmt(f.kfile, f.kline)
    second, other = _stmt(f.rfile, f.rline)
    if f.kfile != f.rfile or first is None or block is not other or first is second:
        return None
    start, end = block.index(first), block.index(second)
    return None if start > end else (block, start, end)


def _backward_at(filename, line):
    """(statement at the line, its block, its `x.backward()` call, `x` dotted): the call and
    the name are None where the statement is no such call (the name, where `x` is no name)."""
    statement, block = _stmt(filename, line)
    call = _called(statement, "backward")
    return statement, block, call, call and _dotted(call.func.value)


def _called(statement, name):
    """The call of a statement `x.name(...)`, else None."""
    call = getattr(statement, "value", None)
    func = getattr(call, "func", None)
    if isinstance(statement, ast.Expr) and getattr(func, "attr", None) == name:
        return call
    return None


def _fix_sum(f):
    """One backward call on the sum of both losses, with one step for each optimizer after it:
    where both calls are written in one block and every optimizer stepped between them steps
    again after the second."""
    both = _one_block(f)
    calls = both and [_called(both[0][i], "backward") for i in both[1:]]
    if not both or None in calls:
        return None
    block, start, end = both
    stepping = {i: _called(n, "step") for i, n in enumerate(block)}
    steps = {i: _dotted(c.func.value) for i, c in stepping.items() if c and _dotted(c.func.value)}
    between = [i for i in steps if start < i < end]
    after = {steps[i] for i in steps if i > end}
    if not between or any(steps[i] not in after for i in between):
        return None
    source = "".join(linecache.getlines(f.rfile))
    a, b = (ast.get_source_segment(source, c.func.value) for c in calls)
    edits = [_delete(f.rfile, block[i].lineno) for i in [start, *between]]
    receiver = calls[1].func.value
    line = linecache.getline(f.rfile, receiver.lineno)
    wrapped = line[: receiver.col_offset].endswith("(")  # `(w * loss).backward()`
    edits.append(_splice(f.rfile, receiver, f"{a} + {b}" if wrapped else f"({a} + {b})"))
    why = (
        "Add the losses and call backward once, then step: one optimizer trains what both reach,"
        " so one step on the sum replaces the step between the calls."
    )
    return _fix_of(edits, "machine", why)


def _fix_sum_calls(f):
    """One call of the helper that goes back and steps, on the sum of both losses: where the
    two calls are statements of one block, `update(a)` then `update(b)`, each given the loss
    alone (so one optimizer, the helper's, steps for both)."""
    first, block = _stmt(f.ffile, f.fline)
    second, other = _stmt(f.rfile, f.rline)
    helper = _scope(_parse(f.kfile), f.kline)  # the function the calls go back in
    steps = any(_called(n, "step") for n in ast.walk(helper) if isinstance(n, ast.stmt))
    if f.ffile != f.rfile or block is not other or first is second or not steps:
        return None
    between = block[block.index(first) + 1 : block.index(second)]
    if block.index(first) > block.index(second) or any(_called(n, "step") for n in between):
        return None  # a step of the caller's own between them: an optimizer of its own
    calls = [_called_alone(n) for n in (first, second)]
    named = {_dotted(c.func).rsplit(".", 1)[-1] for c in calls if c is not None}
    if None in calls or _dotted(calls[0].func) != _dotted(calls[1].func):
        return None
    if named != {getattr(helper, "name", None)}:
        return None  # not a call of the function that goes back
    source = "".join(linecache.getlines(f.rfile))
    a, b = (ast.get_source_segment(source, c.args[0]) for c in calls)
    edits = [_delete(f.rfile, first.lineno), _splice(f.rfile, calls[1].args[0], f"{a} + {b}")]
    why = (
        f"Call `{_dotted(calls[0].func)}` once, on the sum of both losses: its step then"
        " trains what both reach, from one backward through the shared pass."
    )
    return _fix_of(edits, "machine", why)


def _called_alone(statement):
    """The call of a statement `name(x)` (one argument, no keywords), else None."""
    call = getattr(statement, "value", None)
    if not isinstance(statement, ast.Expr) or not isinstance(call, ast.Call):
        return None
    alone = len(call.args) == 1 and not call.keywords and _dotted(call.func) is not None
    return call if alone else None


def _fix_saved(f):
    """Saved tensors read after the call that freed them: read them before it, or keep them."""
    moved = None
    call, other = _stmt(f.kfile, f.kline)
    # The statement of the call's block that reads them, itself or through a helper it calls.
    reads = [
        n
        for file, line in f.sframes
        if file == f.kfile
        for n in other or ()
        if n.lineno <= line <= n.end_lineno
    ]
    read, block = (reads[0], other) if reads else (None, None)
    if read is not None and block.index(call) < block.index(read):
        between = block[block.index(call) + 1 : block.index(read)]
        stored = {x for n in between for t in ast.walk(n) for x, _ in _names(t, ast.Store)}
        if not stored & {x for x, _ in _names(read, ast.Load)}:
            moved = [_copied(f.kfile, [read], call.lineno), _delete(f.kfile, read.lineno)]
    why = "Read the saved tensors before the call that frees them."
    keep = (
        "Keep the graph at the call that freed them, if you must read them after it (it holds"
        " their memory until the graph is dropped)."
    )
    return [moved and _fix_of(moved, "machine", why), _fix_of([_retain_first(f)], "machine", keep)]


def _both_differentiable(f):
    """create_graph=True on both autograd.grad calls, where a loss uses the first's result."""
    if not (f.grads and f.raise_kind == "grad"):
        return None
    why = (
        "Make both torch.autograd.grad calls' results differentiable: the loss goes back"
        " through both, and the first call keeps the graph for the second."
    )
    both = [_keyword(f.ffile, f.fline, "create_graph"), _keyword(f.rfile, f.rline, "create_graph")]
    return _fix_of(both, "machine", why)


def _fix_value(f):
    """The second loss reaches the stepped pass through a value: detach it, or compute it again."""
    name, file, line, alone = f.between[1]
    # Where the reading function itself makes it (`logits, loss = model(X, Y)` in the loop),
    # before any other function's `logits = ...` (the model's forward), whose names it lacks.
    own = [n for n in _bound_in(_scope(_parse(file), line), name) if n.lineno < line]
    made = own or [n for n in _assignments(file, name) if n.lineno < line]
    loads = [
        n
        for n in ast.walk(_parse(file))
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    ]
    after = f.fline if f.ffile == file else line  # read after the step, on the way there
    nodes = [n for n in loads if n.lineno == line] or [n for n in loads if after < n.lineno < line]
    why = (
        f"Compute `{name}` again after the step, if the second loss should train"
        " through the pass the step changed (a generator's loss through the discriminator)."
    )
    # Before its first read after the step at the loss's level (a distribution sampled from it).
    first = min(
        [
            n.lineno
            for n in loads
            if after < n.lineno < line and _indent(file, n.lineno) == _indent(file, line)
        ],
        default=line,
    )
    again = _fix_of([_copied(file, made[-1:], first, name)], "machine", why) if made else None
    detach = _fix_of(
        [_detached(file, nodes[0])] if nodes else [],
        "machine",
        f"Give the second loss `{name}` detached, if it should not train the pass the"
        " step changed (an actor's loss through the critic's value).",
    )
    if alone and again and not _detached_inputs(f.nfile, f.nline):  # no input to detach
        return [again, detach]
    if alone and again:  # it trains only through the pass: a generator's loss
        why = (
            f"Compute `{name}` again after the step for the second loss, and give the first"
            " pass its input detached, so the first loss (a discriminator's) does not go"
            " back through, and free, what comes before it."
        )
        both = _fix_of(again["edits"] + _detached_inputs(f.nfile, f.nline), "machine", why)
        return [both, again, detach]
    if detach and nodes:  # the layers before it are shared: keep them for the second loss
        why = (
            f"Give the second loss `{name}` detached, and keep the graph at the first call"
            " for the layers both losses share (an actor's loss through the critic's value)."
        )
        both = _fix_of(detach["edits"] + [_retain_first(f)], "machine", why)
        return [both, detach, again]
    return [detach, again]


def _retain_first(f):
    """retain_graph=True on the backward call that freed the graph, where it is written."""
    return _keyword(f.kfile, f.kline, "retain_graph")


def _detached_inputs(filename, line):
    """Edits that detach the names a call on the line is given (`D(fake)` -> `D(fake.detach())`)."""
    calls = [
        n
        for n in ast.walk(_parse(filename))
        if isinstance(n, ast.Call) and n.lineno <= line <= n.end_lineno and n.args
    ]
    if not calls:
        return []
    first = min(calls, key=lambda n: (n.lineno, n.col_offset))
    names = [a for a in first.args if isinstance(a, (ast.Name, ast.Attribute))]
    return [_detached(filename, names[0])] if names else []


def _fix_detach_input(f):
    """A step that does not train the pass (a discriminator's) is given its output detached."""
    name = f.closest
    made = _assigned(f.ffile, name.split(".")[-1], f.fline) or 0
    loads = [
        n
        for n in ast.walk(_parse(f.ffile))
        if isinstance(n, (ast.Name, ast.Attribute))
        and isinstance(n.ctx, ast.Load)
        and _dotted(n) == name
        and made < n.lineno <= f.fline
    ]
    why = (
        f"Give the step between the calls `{name}` detached, so its loss does not go back"
        " through (and free) the pass the other loss still needs."
    )
    return _fix_of([_detached(f.ffile, n) for n in loads], "machine", why)


def _fix_cached(f):
    """`parametrize.cached()` entered around the loop: enter it in each step instead."""
    file, line, _ = f.cached
    with_ = next(n for n in ast.walk(_parse(file)) if isinstance(n, ast.With) and n.lineno == line)
    loop = with_.body[0]
    if len(with_.body) != 1 or not isinstance(loop, LOOPS) or loop.orelse:
        return []
    lines = linecache.getlines(file)
    pad, inner = _indent(file, with_.lineno), _indent(file, loop.lineno)
    head = [pad + t[len(inner) :] for t in lines[loop.lineno - 1 : loop.body[0].lineno - 1]]
    enter = lines[with_.lineno - 1][len(pad) :]
    new = "".join(head) + inner + enter + "".join(lines[loop.body[0].lineno - 1 : loop.end_lineno])
    why = "Enter the cache in each step, so each step computes the weight again, from the weights as they are."
    return [_fix_of([_edit(file, with_.lineno, loop.end_lineno, new)], "machine", why)]


def _fix_reentrant(files):
    """A reentrant checkpoint frees its inner graph whatever the outer call's retain_graph."""
    edits = []
    for file in dict.fromkeys(files):
        for n in ast.walk(_parse(file)):
            func = getattr(n, "func", None)
            if not isinstance(n, ast.Call) or _dotted(func) is None:
                continue
            if _dotted(func).split(".")[-1] != "checkpoint":
                continue
            given = [k for k in n.keywords if k.arg == "use_reentrant"]
            if not given:
                edits.append(_keyword(file, n.lineno, "use_reentrant", "False", n))
            elif isinstance(given[0].value, ast.Constant) and given[0].value.value is True:
                edits.append(_splice(file, given[0].value, "False"))
    why = (
        "Use the non-reentrant checkpoint: the reentrant one runs a backward of its own, which"
        " frees what it recomputed whatever retain_graph the outer call was given."
    )
    return [_fix_of(edits, "machine", why)] if edits else []


_FIXES = {
    "carried-state/rnn": _fix_state,
    "carried-state/lstm": _fix_state,
    "carried-state/lstm-both": _fix_state,
    "carried-state/kept": _fix_kept,
    "carried-state/bank": _fix_kept,
    "carried-state/clear": _fix_clear,
    "carried-state/attr": _fix_attr,
    "carried-state/before": _fix_built_before,
    "carried-state/target": _fix_built_before,
    "carried-state/frozen": _fix_built_before,
    "carried-state/slices": _fix_state,
    "carried-state/ema": _fix_ema,
    "carried-state/loss": _fix_loss_kept,
    "carried-state/total": _fix_total,
    "carried-state/accumulator": _fix_accumulator,
    "same-loss-twice": _fix_twice,
    "shared-forward": _fix_shared,
    "saved-read": _fix_saved,
}


def _candidates(f):
    """The fixes to offer, machine-applicable first, in the order the run's facts favour."""
    rule = _FIXES.get(f"{f.cause}/{f.sub}") or _FIXES.get(f.cause)
    found = []
    if f.cached:
        with contextlib.suppress(Exception):
            found += _fix_cached(f)
    for kind in (rule, _fix_deep if f.deep and f.cause == "carried-state" else None):
        if kind is not None and not f.special:
            with contextlib.suppress(Exception):  # a fix that cannot be written is not offered
                found += [x for x in kind(f) if x is not None]
    # A tensor `__init__` computes from the object's parameters (SAC's `self.alpha =
    # self.log_alpha.exp()`) is one node for every step, and for both losses of the first.
    kept = f.cause == "carried-state" and f.sub not in ("frozen", "target")
    if (kept or (f.cause == "shared-forward" and f.in_init)) and not f.special:
        with contextlib.suppress(Exception):
            found[:0] = [x for x in [_fix_property(f)] if x is not None]
    seen, unique = set(), []
    for fix in found:
        key = json.dumps(fix["edits"], sort_keys=True)
        if fix["edits"] and key in seen:
            continue
        seen.add(key)
        unique.append(fix)
    if f.text:  # the sentence, for what no edit here does (add the losses, step once)
        unique.append(_fix_of([], "manual", f.text))
    return unique


# Trying fixes -----------------------------------------------------------------------------
# `--try` runs the script again in a process of its own for each machine-applicable fix, the
# edits applied in memory (files on disk unchanged), and stops it two calls past the one that
# raised.
# A fix passes when that run raises nothing and every parameter that got a gradient before the
# error in the original run gets a non-zero gradient again, also from the step that raised on.
TRY_ENV = "BACKTWICE_TRY"
_EDITED = {}  # in a try: {absolute path: edited text}
_MAIN = {}  # "globals": the script's, which name the parameters once it has ended
_FORKS = []  # under --try: the _Forks that forks each try (None in a try's own process)
TRIES = 6
# A try may take this long: four times what the run took to the error, torch's import included,
# and half a minute more (a try's own torch import on a loaded machine, where the run's was quick).
TRY_BASE, TRY_FACTOR = 30.0, 4.0
# Read by the interpreter, torch or OpenMP as a process starts: a try whose environment differs
# in these from the run's start is a fresh process, not a fork.
STARTUP = ("PYTHON", "OMP_", "MKL_", "KMP_", "OPENBLAS", "TORCH", "LC_", "LANG", "LD_")
_KIDS = "backtwice-children-"  # the folder of the sitecustomize the script's children load


def _startup(env):
    # Not the reader's: the children's sitecustomize folder the run put first on PYTHONPATH,
    # and the compile cache folder torch names as it compiles (the one it would use anyway).
    env = {k: v for k, v in env.items() if k.startswith(STARTUP) and k != "TORCHINDUCTOR_CACHE_DIR"}
    if "PYTHONPATH" in env:
        parts = env.pop("PYTHONPATH").split(os.pathsep)
        kept = [p for p in parts if not os.path.basename(p).startswith(_KIDS)]
        env.update({"PYTHONPATH": os.pathsep.join(kept)} if kept else {})
    return sorted(env.items())


class _Forks:
    """Under --try on Linux, a process forked as the diagnoser starts (torch imported, nothing
    of the script run) that forks each try: a try starts where a fresh `python diagnose.py
    SCRIPT` stands once its imports are done, without importing torch again (2 to 5 s a try).
    A try is a fresh process elsewhere, where the environment's start-up variables changed, or
    once the forking process is gone."""

    def __init__(self):
        self.pid, self.pending = None, b""
        self.startup = _startup(os.environ)

    def start(self):
        """In the run: self. In a try's process: None (it goes on as the try)."""
        if not sys.platform.startswith("linux") or threading.active_count() > 1:
            return self
        asks, self.asks = os.pipe()
        self.answers, answers = os.pipe()
        _flush_output()
        pid = os.fork()
        if pid:
            os.close(asks)
            os.close(answers)
            self.pid = pid
            return self
        os.close(self.asks)
        os.close(self.answers)
        return self._serve(asks, answers)

    def _serve(self, asks, answers):
        # The forking process: quiet, gone with the run; a try's child returns from here.
        with contextlib.suppress(BaseException):
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)  # gone when the run is
            with os.fdopen(asks, "rb") as reading:
                for line in reading:
                    ask = json.loads(line)
                    pid = os.fork()
                    if pid == 0:
                        return self._become(ask, null, answers, interrupt)
                    os.write(answers, b"%d\n" % pid)
                    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                    os.write(answers, b"%d\n" % status)
        os._exit(0)

    @staticmethod
    def _become(ask, null, answers, interrupt):
        # A try's process: the run's working folder, environment and SIGINT handler, stdin
        # empty, its output in the log, as a fresh process started by the run would have them.
        try:
            os.close(answers)
            if interrupt is not None:
                signal.signal(signal.SIGINT, interrupt)
            os.chdir(ask["cwd"])
            os.environ.clear()
            os.environ.update(ask["env"])
            log = os.open(ask["log"], os.O_WRONLY | os.O_APPEND)
            os.dup2(null, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.close(log)
            os.close(null)
        except BaseException:
            os._exit(1)
        return None

    def run(self, env, log, budget):
        """A try's exit status, None once it ran past the budget (it is killed then); raises
        OSError where this cannot fork it (a fresh process runs it)."""
        if self.pid is None or _startup(env) != self.startup:
            raise OSError("no fork")
        ask = json.dumps({"env": env, "cwd": os.getcwd(), "log": log}) + "\n"
        data = ask.encode("utf-8", "surrogateescape")
        while data:
            data = data[os.write(self.asks, data) :]
        pid = int(self._answer(None))
        status = self._answer(budget)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            self._answer(None)
            return None
        return int(status)

    def close(self):
        """Once the tries are done: end the forking process (idle, waiting for a try)."""
        if self.pid is not None:
            for end in (self.asks, self.answers):
                with contextlib.suppress(OSError):
                    os.close(end)
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            self.pid = None

    def _answer(self, timeout):
        import select

        end = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = None if end is None else max(0.0, end - time.monotonic())
            if not select.select([self.answers], [], [], left)[0]:
                return None
            chunk = os.read(self.answers, 4096)
            if not chunk:
                self.pid = None
                raise OSError("the forking process is gone")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()


class _Tracker(_Patches):
    """Counts backward and grad calls and notes the leaves that got a non-zero gradient."""

    def __init__(self, stop_after=None, result=None):
        super().__init__()
        self.calls, self.raised_at, self.got, self.late, self.since = 0, None, {}, {}, None
        self.stop_after, self.result, self.depth = stop_after, result, 0
        # reach: what the line that raised trained in its calls before and reaches again;
        # by_line: {(file, line): ids of the parameters an optimizer stepped right after one
        # of its calls, with that call's gradient}; pending: (line, ids) of the last call.
        # In a try, unstepped: what an optimizer stepped with no gradient right after the
        # call at the index that raised.
        self.reach, self.watch, self.unstepped, self.hook = [], False, {}, None
        self.by_line, self.pending = {}, None
        # stepped: the parameters an optimizer stepped with a non-zero gradient (a fix that
        # removes a backward call a trainer's zero_grad() relied on leaves them none).
        self.stepped, self.baseline_stepped, self.held = {}, [], {}
        # The names the stepped parameters had when first stepped: a tensor made again in each
        # outer step (`emb = emb.detach().requires_grad_()`) is named by the name it had then.
        self.stepped_names = set()

    def start(self):
        for name in ("backward", "grad"):
            self._patch(torch.autograd, name, self._wrap(getattr(torch.autograd, name), name))
        self._track_optimizers()
        module = sys.modules[torch.optim.Optimizer.__module__]
        register = getattr(module, "register_optimizer_step_pre_hook", None)
        if register is not None:
            self.hook = register(self._stepping)

    def stop(self):
        self._unpatch()
        if self.hook is not None:
            self.hook.remove()

    def _stepping(self, optimizer, args=(), kwargs=None):
        if self.pending is not None:  # a step right after a call: what it trains
            line, fresh = self.pending
            self.by_line.setdefault(line, set()).update(fresh & _held(optimizer))
        args = args[1:] if args and args[0] is optimizer else args  # torch passes self first
        closure = args[0] if args else (kwargs or {}).get("closure")
        # A step given a closure (L-BFGS) computes its gradients after this hook: not counted.
        new = {}
        for group in optimizer.param_groups if closure is None else ():
            for p in group["params"]:
                self.held[id(p)] = p
                if id(p) not in self.stepped and p.grad is not None and bool(p.grad.ne(0).any()):
                    self.stepped[id(p)] = new[id(p)] = p
        if new and self.result is not None:  # in a try, where the names are compared
            self.stepped_names.update(_param_names(new, sys._getframe(1), list(self.made)))
        if self.watch:  # a step right after the call that raised in the original run
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None or not bool(p.grad.ne(0).any()):
                        self.unstepped[id(p)] = p

    def _wrap(self, original, kind):
        @functools.wraps(original)
        def tracked(*args, **kwargs):
            roots = args[0] if args else kwargs.get("tensors" if kind == "backward" else "outputs")
            leaves = _leaves(_kind(roots)[1]) if kind == "backward" else []
            # Only the reader's own calls count: those made inside one (a custom Function's
            # backward taking autograd.grad) do not shift where a try stops.
            outer, self.depth = self.depth == 0, self.depth + 1
            self.calls += outer
            line = _reader_line(sys._getframe(1)) if self.since is None else None
            before = {id(t): _grad_key(t) for t in leaves} if line else {}
            if outer:
                self.pending = None
            try:
                result = original(*args, **kwargs)
            except BaseException as exc:
                text = str(exc)
                if self.raised_at is None and (BACKWARD_TWICE in text or INPLACE in text):
                    self.raised_at = self.calls
                    self.baseline = self.names(sys._getframe(1))
                    self.baseline_stepped = self.names(sys._getframe(1), self.stepped)
                    trained = self.by_line.get(line, set())
                    here = {id(t): t for t in leaves if id(t) in trained}
                    self.reach = _param_names(here, sys._getframe(1), list(self.made))
                exc.__traceback__ = exc.__traceback__.tb_next
                raise
            finally:
                self.depth -= 1
            inputs = args[1] if kind == "grad" and len(args) > 1 else kwargs.get("inputs")
            if kind == "grad":
                inputs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs or ())
                pairs = [(t, result[i]) for i, t in enumerate(inputs) if i < len(result)]
            else:
                pairs = ((t, t.grad) for t in leaves)
            late = self.since is not None and self.calls >= self.since
            for tensor, grad in pairs:
                if grad is not None and bool(grad.ne(0).any()):
                    self.got[id(tensor)] = tensor
                    if late:  # from the call that raised in the original run on
                        self.late[id(tensor)] = tensor
                    if outer and id(tensor) in before and before[id(tensor)] != _grad_key(tensor):
                        self.pending = self.pending or (line, set())  # this call's gradient
                        self.pending[1].add(id(tensor))
            if outer:
                self.watch = kind == "backward" and self.calls == self.since
            if outer and self.stop_after is not None and self.calls >= self.stop_after:
                self.finish(None, sys._getframe(1))
            return result

        return _invisible(tracked)

    def names(self, frame, tensors=None):
        """The names of the tensors that got gradients (or of `tensors`), as the reader's code
        reaches them."""
        return _param_names(self.got if tensors is None else tensors, frame, list(self.made))

    def finish(self, error, frame):
        # In a try: say how it went and end the process, as its own exit would not tell.
        late = _param_names(self.late, frame, list(self.made))
        outcome = {"calls": self.calls, "parameters": self.names(frame), "error": error}
        outcome["late"] = late
        outcome["unstepped"] = _param_names(self.unstepped, frame, list(self.made))
        outcome["stepped"] = sorted(set(self.names(frame, self.stepped)) | self.stepped_names)
        outcome["held"] = self.names(frame, self.held)
        with open(self.result, "w", encoding="utf-8") as out:
            json.dump(outcome, out)
        _flush_output()
        os._exit(0)


def _reader_line(frame):
    """(file, line) of the reader's frame nearest `frame`."""
    while frame is not None and not _is_reader(frame.f_code):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None


def _grad_key(tensor):
    # What tells a new gradient from the one there was: its object and its version.
    grad = tensor.grad
    return None if grad is None else (id(grad), grad._version)


def _leaves(tensors, limit=SEARCH_LIMIT):
    stack, seen, found = [t.grad_fn for t in tensors if t.grad_fn is not None], {}, []
    found += [t for t in tensors if t.grad_fn is None and t.requires_grad]
    while stack and len(seen) < limit:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        variable = getattr(node, "variable", None)
        if variable is not None:
            found.append(variable)
        else:
            stack.extend(_children(node))
    return found


def _param_names(got, frame, optimizers):
    named, scopes = {}, [_MAIN.get("globals") or vars(sys.modules["__main__"])]
    frames = []
    while frame is not None:
        if _is_reader(frame.f_code):
            frames.append(frame.f_locals)
        frame = frame.f_back
    held = set().union(*map(_held, optimizers))
    for scope in scopes + frames[::-1]:
        for var, value in list(scope.items()):
            for name, tensor in _named_tensors(var, value, kept=scope is scopes[0]):
                named.setdefault(id(tensor), name)
    # What an optimizer steps, where there is one: gradients of frozen weights train nothing.
    return sorted(
        named.get(key, "a tensor of shape " + str(list(t.shape)))
        for key, t in got.items()
        if not held or key in held
    )


def _named_tensors(var, value, depth=2, kept=False):
    # `kept`: a global, whose names stay the same through a run; an object's attributes are
    # walked there too (`model.netD_A.0.weight`), so no frame's argument (`netD`, which is one
    # discriminator at one call and another at the next) names what the object keeps.
    if isinstance(value, torch.Tensor):
        return [(var, value)]
    if (
        kept
        and depth
        and not isinstance(
            value,
            (torch.nn.Module, torch.optim.Optimizer, list, tuple, dict, type, types.ModuleType),
        )
    ):
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict) and not callable(value):
            return [
                x
                for k, v in list(attrs.items())[:64]
                if not k.startswith("_")
                for x in _named_tensors(f"{var}.{k}", v, depth - 1, kept)
            ]
    if isinstance(value, torch.nn.Module):
        return [(f"{var}.{n}", p) for n, p in value.named_parameters()]
    if isinstance(value, torch.optim.Optimizer):
        return [
            (f"{var}.param_groups[{i}][{j}]", p)
            for i, g in enumerate(value.param_groups)
            for j, p in enumerate(g["params"])
        ]
    if depth and isinstance(value, (list, tuple)):
        return [
            x for i, v in enumerate(value[:64]) for x in _named_tensors(f"{var}[{i}]", v, depth - 1)
        ]
    if depth and isinstance(value, dict):
        return [
            x
            for k, v in list(value.items())[:64]
            for x in _named_tensors(f"{var}[{k!r}]", v, depth - 1)
        ]
    return []


def _read_lines(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read().splitlines(True)


def _edited_sources(edits, read=_read_lines):
    """Each edited file's text, the edits applied: {path: text}."""
    texts = {}
    for e in sorted(edits, key=lambda e: -e["start"]):
        path = e["file"] if read is not _read_lines else os.path.abspath(e["file"])
        lines = texts.get(path)
        if lines is None:
            lines = list(read(path))
            if not lines:
                raise ValueError(path)
        lines[e["start"] - 1 : e["end"]] = e["new"].splitlines(True)
        texts[path] = lines
    return {path: "".join(lines) for path, lines in texts.items()}


def _use_sources(texts):
    """Run these texts in place of the files on disk: the script, and modules it imports."""
    import importlib.machinery

    for path, text in texts.items():
        linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    _EDITED.update(texts)
    loader = importlib.machinery.SourceFileLoader
    original = loader.get_code

    def get_code(self, fullname):
        path = os.path.abspath(self.get_filename(fullname))
        if path in texts:
            return compile(texts[path], path, "exec", dont_inherit=True)
        return original(self, fullname)

    loader.get_code = get_code
    return texts


def _try_one(fix, argv, budget, baseline):
    """Run the script again with the fix's edits; return its `tried` record."""
    with tempfile.TemporaryDirectory(prefix="backtwice-try-") as folder:
        spec, result = os.path.join(folder, "spec.json"), os.path.join(folder, "result.json")
        with open(spec, "w", encoding="utf-8") as out:
            stop = baseline["stop"]
            spec_data = {"edits": fix["edits"], "stop_after": stop, "since": stop - 2}
            json.dump(dict(spec_data, result=result), out)
        env = dict(os.environ, **{TRY_ENV: spec})
        env.pop(CHILD_ENV, None)  # its children run plainly
        env.pop(CHILD_ENV + "_SCRIPT", None)
        log = os.path.join(folder, "log")
        with open(log, "wb") as out:
            try:
                code = _FORKS[0].run(env, log, budget)
            except (IndexError, OSError, ValueError):
                code = _fresh_try(argv, env, out, budget)
        if code is None:
            return {"outcome": "timed out", "detail": f"stopped after {budget:.0f} s"}
        if not os.path.exists(result):
            return {"outcome": "raised", "detail": f"exited with status {code}"}
        with open(result, encoding="utf-8") as handle:
            run = json.load(handle)
    return _verdict(run, baseline)


def _fresh_try(argv, env, out, budget):
    """A try in a fresh process: its exit status, None once it ran past the budget."""
    import subprocess

    try:
        return subprocess.run(
            [sys.executable, os.path.abspath(__file__), *argv],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            timeout=budget,
        ).returncode
    except subprocess.TimeoutExpired:
        return None


def _verdict(run, baseline):
    steps = max(0, run["calls"] - baseline["stop"] + 2)
    tried = {"calls": run["calls"], "parameters": len(run["parameters"])}
    if run["error"]:
        return dict(tried, outcome="raised", detail=run["error"])
    missing = [p for p in baseline["parameters"] if p not in run["parameters"]]
    reach = baseline.get("reach", [])
    when = ""
    if not missing and run["calls"] >= baseline["stop"] - 2:  # and again once past the error
        missing = [p for p in reach if p not in run.get("late", [])]
        when = " in the steps from the one that raised on"
    if not missing:  # the line that raised trained these before; now stepped with none
        missing = [p for p in run.get("unstepped", []) if p in reach]
        when = " from the call that raised before, though an optimizer stepped {} right after"
        when = when.format("them" if len(missing) > 1 else "it")
    if not missing:  # trained before the error; now an optimizer steps it, never with one
        held, stepped = run.get("held", []), run.get("stepped", [])
        missing = [p for p in baseline["parameters"] if p in held and p not in stepped]
        missing += [p for p in baseline.get("stepped", []) if p not in stepped + missing]
        when = " when an optimizer stepped {}".format("them" if len(missing) > 1 else "it")
    if missing:
        shown = ", ".join(f"`{p}`" for p in missing[:3]) + (" and more" if len(missing) > 3 else "")
        detail = f"ran, but {shown} got no gradient{when}"
        return dict(tried, outcome="no gradient", detail=detail)
    end = (
        "to its end"
        if run["calls"] < baseline["stop"]
        else f"{steps} calls past the one that raised"
    )
    if baseline["parameters"]:
        compared = f"the same {len(baseline['parameters'])} parameters got gradients"
    elif reach:
        compared = f"the {len(reach)} parameters the call that raised reaches got gradients"
    elif not run["parameters"]:
        # Nothing got a gradient before the error (the calls before it were autograd.grad's,
        # with respect to inputs), so there is nothing to compare with: the run must train.
        return dict(
            tried, outcome="no gradient", detail=f"ran {end}, but no parameter got a gradient"
        )
    else:
        compared = (
            "no parameter had a gradient before the error to compare with, and "
            f"{len(run['parameters'])} got gradients in this run"
        )
    return dict(tried, outcome="passed", detail=f"ran {end}; {compared}")


def _child(spec_path, script, run):
    """In a try: the edits in memory, the calls tracked; say how the run went."""
    os.environ.pop(TRY_ENV, None)
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    _use_sources(_edited_sources(spec["edits"]))
    tracker = _Tracker(spec["stop_after"], spec["result"])
    tracker.since = spec.get("since")
    tracker.start()
    try:
        run()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            tracker.finish(f"exited with status {exc.code}", None)
    except BaseException as exc:
        tb, where = exc.__traceback__, ""
        while tb is not None:
            if _is_reader(tb.tb_frame.f_code):
                where = f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
            tb = tb.tb_next
        tracker.finish(
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{where}", None
        )
    tracker.finish(None, None)


def _try_all(report, argv, tracker, shown, say):
    """Try each machine-applicable fix; fill in its `tried`."""
    machine = [f for f in report.get("fixes", []) if f["applicability"] == "machine"][:TRIES]
    if tracker.raised_at is None and report.get("cause") == "saved-read":
        tracker.raised_at = tracker.calls + 1  # read outside a call: as if by the next one
        tracker.baseline = tracker.names(None)
        tracker.baseline_stepped = tracker.names(None, tracker.stepped)
    if not machine or tracker.raised_at is None:
        return
    say(
        f"{PREFIX}--try runs {shown} again, once per fix ({len(machine)} runs): whatever it writes, logs or sends, it does again; its files on disk stay as they are\n"
    )
    baseline = {"stop": tracker.raised_at + 2, "parameters": tracker.baseline}
    baseline["reach"] = tracker.reach
    baseline["stepped"] = tracker.baseline_stepped
    budget = TRY_BASE + TRY_FACTOR * (time.monotonic() - _STARTED)
    for fix in machine:
        fix["tried"] = _try_one(fix, argv, budget, baseline)
    _smallest_first(report["fixes"])


def _smallest_first(fixes):
    """A passing fix whose edits are some of another passing fix's goes before it: what the
    other adds was not needed (a retain_graph=True beside the detach that was enough)."""
    edits = [{json.dumps(e, sort_keys=True) for e in fix["edits"]} for fix in fixes]
    passed = [i for i, fix in enumerate(fixes) if fix["tried"]["outcome"] == "passed"]
    for small in passed:
        bigger = [i for i in passed if i < small and edits[small] < edits[i]]
        if bigger:
            fixes.insert(bigger[0], fixes.pop(small))
            edits.insert(bigger[0], edits.pop(small))


def format_report(report):
    """The report as printed: the reader's lines in source order, labelled, then cause and fix."""
    head = (
        "a saved tensor changed after retain_graph=True"
        if report["cause"] == "inplace-after-retain"
        else "backward through a graph an earlier call freed"
    )
    out = [PREFIX + head]
    lines = report["lines"]
    width = max([len(str(e["line"])) for e in lines] + [1])
    bar = " " * width + " |"
    shown = last = None
    for entry in lines:
        if entry["file"] != shown:
            shown = entry["file"]
            out += [" " * width + "--> " + str(shown), bar]
        code = entry["code"] or "?"
        indent = " " * entry.get("indent", 0)
        if last != (shown, entry["line"]):
            last = (shown, entry["line"])
            out.append(f"{entry['line']:>{width}} | {indent}{code}")
        mark = "^" if entry["kind"] == "raises" else "-"
        out.append(f"{bar} {indent}{mark * len(code)} {entry['label']}")
        for caller in entry.get("callers", [])[:3]:
            out.append(f"{bar} {indent}= called from {_where(caller)}: {caller['code']}")
    out.append(bar)
    out.append("cause: {}".format(report["cause"]))
    if report["fix"]:
        out.append("fix: " + report["fix"])
    if report["checker"]:
        out.append("checker: the page's " + report["checker"])
    fixes = [f for f in report.get("fixes") or [] if f["why"] != report["fix"]]
    out += _format_fixes(fixes, lines[0]["file"] if lines else None)
    return "\n".join(out)


def _hunks(diff, shown):
    # The diff's hunks, a header naming its file where it is not the report's (no ---/+++ lines).
    name = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:]
        elif line.startswith("@@") and name != shown:
            yield f"{name} {line}"
        elif not line.startswith("--- "):
            yield line


def _format_fixes(fixes, shown):
    out = []
    for number, fix in enumerate(fixes, 1):
        tried = fix["tried"]
        how = tried["outcome"] + (": " + tried["detail"] if tried.get("detail") else "")
        if fix["applicability"] == "manual":
            how = "yours to make"
        out.append(f"fix {number} ({how}): {fix['why']}")
        out += ["  " + line for line in _hunks(fix.get("diff", ""), shown)]
    return out


def _emit(text):
    with contextlib.suppress(AttributeError, OSError, ValueError):  # stderr closed or None
        if sys.stderr.isatty() and not os.environ.get("NO_COLOR"):
            text = re.sub(r"(?m)([\^]+ .*|^cause: .*)$", "\x1b[1;31m\\1\x1b[0m", text)
            text = re.sub(r"(?m)(-+ [A-Za-z].*)$", "\x1b[1;34m\\1\x1b[0m", text)
        prefix = _rank_prefix()
        if prefix:
            text = "\n".join(prefix + line for line in text.split("\n"))
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _special(path):
    # A pipe, a terminal (/dev/stdout) or the file stdout or stderr goes to: written in place
    # (appended), never replaced by a file.
    try:
        info = os.stat(path)
    except OSError:
        return False
    if not os.path.isfile(path):
        return True
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            if os.path.samestat(info, os.fstat(fd)):
                return True
    return False


def _write_json(path, report):
    text = json.dumps(report, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    temporary = None
    try:
        if _special(path):
            out = open(path, "a", encoding="utf-8")
        else:  # the file a link names is replaced whole, never left half-written
            real = os.path.realpath(path)
            handle, temporary = tempfile.mkstemp(dir=os.path.dirname(real), prefix=".diagnose-")
            out = os.fdopen(handle, "w", encoding="utf-8")
        with out:
            out.write(text)
        if temporary:
            os.chmod(temporary, _mode(real))
            os.replace(temporary, real)
    except OSError as exc:
        if temporary:
            with contextlib.suppress(OSError):
                os.remove(temporary)
        sys.stderr.write(
            f"{PREFIX}--json {path}: {exc.strerror or exc}; the report was not written\n"
        )


def _mode(path):
    """The mode for a file replacing path: its own, or what the umask gives a new one."""
    with contextlib.suppress(OSError):
        return os.stat(path).st_mode & 0o7777
    mask = os.umask(0o22)
    os.umask(mask)
    return 0o666 & ~mask


def _json_problem(path):
    folder = os.path.dirname(os.path.realpath(path))
    if os.path.isdir(path):
        return "is a folder; give a file name"
    device = _device_problem(path)
    if device:
        return device
    if not _special(path):
        if not os.path.isdir(folder):
            return f"no folder {folder}; create it first"
        try:
            handle, temporary = tempfile.mkstemp(dir=folder, prefix=".diagnose-")
            os.close(handle)
            os.remove(temporary)
        except OSError:
            return "not writable; choose another file"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "not writable; choose another file"
    return None


class diagnose:  # noqa: N801 - used as `with diagnose():`, like a function
    """Record backward calls inside the block and report the error if it fires there."""

    def __init__(self, json_path=None, script=None, shown=None):
        """`script` and `shown`: report that file under that name, and keep the report quiet
        (read it from .report); the page's capture uses this. Inside another diagnoser (the
        runner, a notebook), this one does nothing and reads that one's report."""
        self.json_path = json_path and os.path.abspath(json_path)
        self.script = script
        self.shown = shown
        self.state = None

    def __enter__(self):
        if _active() is None:
            self.state = _Recorder(self.script, self.shown, quiet=self.script is not None)
            if self.script is not None:
                self.state.top = sys._getframe(1)
            self.state.start()
        return self

    def __exit__(self, kind, exc, tb):
        if self.state is None:
            if self.json_path and _active() is not None:
                _write_json(self.json_path, _active().result())
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
        state = self.state or _active()
        return state.result() if state is not None else None


def load_ipython_extension(shell):
    """`%load_ext backtwice.diagnose`: keep a diagnoser on across the notebook's cells."""
    if _active() is None:
        _Recorder().start()


def unload_ipython_extension(shell):
    """`%unload_ext backtwice.diagnose`."""
    if _active() is not None:
        _active().stop()


def _trimmed(tb, script):
    entries, started = [], False
    while tb is not None:
        code = tb.tb_frame.f_code
        if not started and code.co_filename == script and code.co_name == "<module>":
            started = True
        started = started or code is getattr(runpy._run_module_as_main, "__code__", None)
        if started and not os.path.normcase(os.path.abspath(code.co_filename)).startswith(_HERE):
            entries.append(tb)
        tb = tb.tb_next
    entries.append(None)
    for index, entry in enumerate(entries[:-1]):
        entry.tb_next = entries[index + 1]
    return entries[0]


USAGE = (
    "usage: python -m backtwice.diagnose [--json FILE] [--try [--fix]] [--]"
    " SCRIPT|DIR|-m MODULE [ARGS...]"
)


def _owned():
    """Files that installed distributions outside the interpreter's library folders own (one
    set per sys.path, built on the first code object that needs it)."""
    key = tuple(sys.path)
    if _OWNED.get("key") != key:
        files = set()
        with contextlib.suppress(Exception):
            from importlib import metadata

            for dist in metadata.distributions():
                base = os.path.normcase(os.path.abspath(str(dist.locate_file(""))))
                if os.path.join(base, "").startswith(_LIBRARIES):
                    continue  # already library code by its folder: its RECORD is not read
                if not any(dist.read_text(n) for n in ("RECORD", "installed-files.txt")):
                    continue  # a checkout's egg-info: its SOURCES.txt is the reader's own code
                for name in dist.files or ():
                    path = os.path.abspath(str(dist.locate_file(name)))
                    files.add(os.path.normcase(path))
        _OWNED.update(key=key, files=frozenset(files))
    return _OWNED["files"]


_OWNED = {}


def _rank_prefix():
    """`[rankN]:` as torch's launcher prefixes a rank's lines, when more than one runs; in a
    child process, its rank under torch.multiprocessing.spawn, else its pid."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        world = 1
    rank = os.environ.get("RANK", os.environ.get("LOCAL_RANK"))
    if world > 1 and rank is not None:
        return f"[rank{rank}]:"
    started = sys.modules.get("multiprocessing")  # a worker of a plain run (its own import)
    started = started is not None and started.parent_process() is not None
    if not (_CHILD or started or os.getpid() != _PID):  # not a child, forked or started
        return ""
    frame = sys._getframe()
    while frame is not None:  # torch.multiprocessing.spawn's _wrap(fn, i, ...) runs worker i
        code = frame.f_code
        if code.co_name == "_wrap" and code.co_filename.endswith("spawn.py"):
            rank = frame.f_locals.get("i")
            if isinstance(rank, int):
                return f"[rank{rank}]:"
        frame = frame.f_back
    return f"[pid {os.getpid()}]:"


CHILD_ENV = "BACKTWICE_DIAGNOSE_CHILD"
_CHILD = []  # [True] in a child process this file was loaded into by its sitecustomize
_PID = os.getpid()

# On a child's PYTHONPATH: chains to the sitecustomize it hides, takes its folder off sys.path,
# and once the child imports torch, loads this file and records (the report printed as the
# error is raised, as `with diagnose():` does). A child that never imports torch pays nothing.
_SITECUSTOMIZE = '''"""Written by backtwice.diagnose for the Python processes a diagnosed script starts."""
import os
import sys


class _WhenTorch:
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        loader = spec and spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            try:
                found = importlib.util.spec_from_file_location("_backtwice_child", os.environ[KEY])
                child = importlib.util.module_from_spec(found)
                sys.modules[found.name] = child
                found.loader.exec_module(child)
                child._start_child()
            except Exception as exc:
                sys.stderr.write("backtwice.diagnose: not diagnosing this child: %r\\n" % (exc,))

        loader.exec_module = exec_module
        return spec


def _start():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
    if os.environ.get(KEY) and "_backtwice_child" not in sys.modules:
        sys.meta_path.insert(0, _WhenTorch())


KEY = "@KEY@"
_start()
'''


def _follow_children(script, shown):
    """Diagnose the Python processes the script starts (multiprocessing's spawn and forkserver
    workers, torch.multiprocessing.spawn's, subprocess children): a sitecustomize in a folder
    put first on their PYTHONPATH. A forked child needs none. Returns what puts the
    environment back and removes the folder, once the script has ended."""
    import atexit
    import shutil

    names = ("PYTHONPATH", CHILD_ENV, CHILD_ENV + "_SCRIPT")
    saved = {name: os.environ.get(name) for name in names}
    try:  # where it cannot be written (no space, a file size limit), children run plainly
        folder = tempfile.mkdtemp(prefix=_KIDS)
        atexit.register(shutil.rmtree, folder, True)
        with open(os.path.join(folder, "sitecustomize.py"), "w", encoding="utf-8") as out:
            out.write(_SITECUSTOMIZE.replace("@KEY@", CHILD_ENV))
    except OSError:
        return lambda: None
    os.environ[CHILD_ENV] = os.path.abspath(__file__)
    os.environ[CHILD_ENV + "_SCRIPT"] = json.dumps([script, shown])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join([folder, *paths])

    def restore():
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, True)

    return restore


def _start_child():
    """In a child process, once it imported torch: record, and report as the error is raised."""
    _CHILD.append(True)
    if _active() is None:
        with contextlib.suppress(ValueError, TypeError):
            script, shown = json.loads(os.environ.get(CHILD_ENV + "_SCRIPT", ""))
            _Child(script, shown).start()
            return
        _Child().start()


class _Child(_Recorder):
    """A child process's recorder: its report printed as the error is raised, since no runner
    in this process prints it after the traceback."""

    child = True

    @property
    def unprinted(self):
        return None

    @unprinted.setter
    def unprinted(self, text):
        if text is not None:
            _emit(text)


def _device_problem(path):
    """Why --json may not write to path, a character device, or None (a tty, /dev/null)."""
    import stat

    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISCHR(info.st_mode):
        return None
    real = os.path.realpath(path)
    if re.fullmatch(r"/dev/(pts/\d+|tty\w*|console|null)", real):
        return None
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd) and os.fstat(fd).st_rdev == info.st_rdev:
                return None
    return "is a device, not a file, a pipe or a terminal; give a file name"


class _Runner(_Recorder):
    """The runner's diagnoser: a report held back to follow the script's own traceback is
    printed however the process then ends (SIGTERM, os._exit), not only when main returns."""

    @property
    def unprinted(self):
        return self.__dict__.get("held")

    @unprinted.setter
    def unprinted(self, text):
        self.__dict__["held"] = text
        if text is not None and "ends" not in self.__dict__:
            self.ends = _guard_ends(self)

    def say(self):
        """Print the held report once."""
        text, self.__dict__["held"] = self.__dict__.get("held"), None
        if text:
            _emit(text)

    def last_words(self):
        """The process ends now (os._exit, SIGTERM): write --json's file, print the report."""
        if getattr(self, "json_path", None):
            _write_json(self.json_path, self.result())
        self.say()

    def unguard(self):
        for undo in reversed(self.__dict__.pop("ends", [])):
            with contextlib.suppress(Exception):
                undo()


def _guard_ends(state):
    """Print the held report before os._exit and on SIGTERM left at its default action; in
    this process only (a forked child inherits both and ends as it would). Returns undoers."""
    pid, original_exit, undo = os.getpid(), os._exit, []

    def _exit(status):
        if os.getpid() == pid:
            state.last_words()
        original_exit(status)

    os._exit = _exit
    undo.append(lambda: setattr(os, "_exit", original_exit))

    def on_term(number, frame):
        if os.getpid() == pid:
            state.last_words()
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)  # ends as SIGTERM ends it: its buffered stdout is lost

    def default():  # unless the script set its own handler since
        if signal.getsignal(signal.SIGTERM) is on_term:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, on_term)
        undo.append(default)
    return undo


def _options(args):
    """(json_path, trying, fixing, what is left) from the runner's options, or an exit status."""
    json_path, trying, fixing = None, False, False
    while args and args[0] in ("--try", "--fix") or args and args[0].startswith("--json"):
        if args[0] in ("--try", "--fix"):
            trying, fixing = True, fixing or args[0] == "--fix"
            args = args[1:]
            continue
        if args[0].startswith("--json="):
            args[:1] = ["--json", args[0][7:]]
        if args[0] != "--json":
            break
        if len(args) < 2 or not args[1]:
            sys.stderr.write("--json: needs a FILE\n" + USAGE + "\n")
            return 2
        json_path, args = os.path.abspath(args[1]), args[2:]
        problem = _json_problem(json_path)
        if problem:
            sys.stderr.write(f"--json {json_path}: {problem}; nothing was run\n")
            return 2
    if args and args[0] == "--":
        args = args[1:]
    if not args or args[0] == "-m" and len(args) < 2:
        sys.stderr.write(("-m: needs a MODULE\n" if args else "") + USAGE + "\n")
        return 2
    return json_path, trying, fixing, args


def _module(args):
    """(shown, script, run) for `-m MODULE ARGS`, run as `python -m` runs it, or a status."""
    try:
        script = runpy._get_module_details(args[1])[1].origin
    except ImportError as exc:  # runpy's own error: the words `python -m` prints
        sys.stderr.write(f"{sys.executable}: {exc}\n")
        return 1
    cwd = os.getcwd()
    shown = os.path.relpath(script) if script.startswith(os.path.join(cwd, "")) else script
    sys.argv = [script] + args[2:]
    sys.path[0] = cwd

    def run():
        # Through the function `python -m` itself calls, so that a traceback shows the frames
        # a plain run's does; in a fresh __main__, as this file may be __main__ itself.
        module = types.ModuleType("__main__")
        saved, sys.modules["__main__"] = sys.modules["__main__"], module
        _MAIN["globals"] = module.__dict__
        try:
            runpy._run_module_as_main(args[1], alter_argv=True)
        finally:
            sys.modules["__main__"] = saved

    return shown, script, run


def _runnable(args):
    """(shown, script, run) for `SCRIPT|DIR ARGS` or `-m MODULE ARGS`, or an exit status."""
    if args[0] == "-m":
        return _module(args)
    shown = args[0]
    folder = os.path.isdir(shown)
    script = os.path.join(shown, "__main__.py") if folder else shown
    if not os.path.isfile(script):
        sys.stderr.write(f"{shown}: no such script, nothing was run\n")
        return 2
    script = os.path.join(os.getcwd(), script) if sys.version_info >= (3, 9) else script
    sys.argv = [shown] + args[1:]
    sys.path[0] = os.path.abspath(shown) if folder else os.path.dirname(os.path.abspath(shown))

    def run():
        if folder:
            runpy.run_path(shown, run_name="__main__")
        else:
            _run_script(script)

    return shown, script, run


def _ended(state, exc, script):
    """The script raised `exc` (not SystemExit): print it as Python would, then the report."""
    _trim_all(exc, script)
    sys.excepthook(type(exc), exc, exc.__traceback__)
    _say(state)
    if isinstance(exc, KeyboardInterrupt):
        # Killed by its own SIGINT, as Python ends on one: what the script printed to a
        # pipe or file is still in its buffer, and Python's own end would have written it.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(AttributeError, OSError, ValueError):
                stream.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


def _say(state):
    if isinstance(state, _Runner):
        state.say()
    elif state.unprinted:
        _emit(state.unprinted)


def main(argv=None):
    """Run a script (or -m MODULE) as __main__ under the diagnoser; return its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + __doc__.strip().split("\n\n", 1)[1])
        return 0
    options = _options(args)
    if isinstance(options, int):
        return options
    json_path, trying, fixing, args = options
    own = _own_command()  # before the script's run replaces sys.argv
    if trying and not os.environ.get(TRY_ENV) and not _FORKS:
        _FORKS.append(_Forks().start())
        if _FORKS[0] is None:  # this process is a try, forked: it goes on as a fresh one would
            _exit_with(main, args)
    target = _runnable(args)
    if isinstance(target, int):
        return target
    shown, script, run = target
    if os.environ.get(TRY_ENV):
        return _child(os.environ[TRY_ENV], script, run)
    state = _active()
    if getattr(state, "child", False):  # a diagnosed script's child runs the diagnoser itself
        state.stop()
        state = None
    if state is None:
        state = _Runner(script, shown)
        state.json_path = json_path
        state.start()
        state.restore_env = _follow_children(script, shown)
    tracker = _Tracker() if trying else None
    if tracker is not None:
        tracker.start()
    after = functools.partial(_after, state, tracker, args, shown, fixing, own)
    try:
        run()
    except SystemExit:  # sys.exit(main()) after a caught error, pytest, Hydra: report too
        after()
        _end(state, json_path)
        _say(state)
        raise
    except BaseException as exc:
        if isinstance(exc, RuntimeError):
            state.saved_read(exc)
        after()
        _end(state, json_path)
        _ended(state, exc, script)
        return 1
    after()
    _end(state, json_path)
    _say(state)
    return 0


def _flush_output():
    """Write out what stdout and stderr hold, before a fork or an os._exit (where Python's own
    end would have written it); a stream that cannot be written is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _exit_with(function, *args):
    """End a forked try's process with the status `function(*args)` gives: it never returns
    into its caller's code (the caller of the diagnoser's main in the run it was forked from)."""
    code = 1
    try:
        code = function(*args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        _flush_output()
        os._exit(code or 0)


def _after(state, tracker, args, shown, fixing, own):
    """Once the script ended: try the fixes (--try), write the first that passed (--fix)."""
    if tracker is not None:
        tracker.stop()
    try:
        _after_run(state, tracker, args, shown, fixing, own)
    finally:
        for forks in filter(None, _FORKS):
            forks.close()
        _FORKS.clear()  # a later main() in this process (a test's) forks afresh


def _after_run(state, tracker, args, shown, fixing, own):
    """The report's fixes: tried, or the command that would try them (`own`, this tool's
    command as the reader typed it); the first written."""
    report = state.report
    if report is None or not report.get("fixes"):
        return
    if tracker is not None:
        _try_all(report, args, tracker, shown, sys.stderr.write)
    elif any(f["applicability"] == "machine" for f in report["fixes"]):
        command = " ".join([own, "--try", *map(_quoted, args)])
        state.unprinted = (state.unprinted or format_report(report)) + (
            f"\n{PREFIX}to try each fix on {shown} (it runs again, the edits in memory): {command}"
        )
        return
    text = format_report(report)
    if fixing:
        text += "\n" + _write_fix(report)
    state.unprinted = text if state.unprinted is not None else None
    if state.unprinted is None and not state.quiet:
        _emit(text)


def _own_command():
    """This tool's command as the reader ran it: `python -m backtwice.diagnose` as a module
    (or imported), `python PATH` as a file (a copy beside the script, site/diagnose.py), the
    path as typed."""
    if __spec__ is not None:
        return "python -m " + __spec__.name
    return "python " + _quoted(sys.argv[0])


def _quoted(arg):
    return arg if re.fullmatch(r"[\w./:=@%+-]+", arg) else "'" + arg.replace("'", "'\\''") + "'"


def _write_fix(report):
    """--fix: write the first fix that passed its try into the reader's files."""
    passed = [f for f in report["fixes"] if f["tried"]["outcome"] == "passed"]
    if not passed:
        return PREFIX + "--fix: no fix passed its try; nothing was written"
    fix = passed[0]
    texts = _edited_sources(fix["edits"])
    for path in texts:
        if _read_lines(path) != linecache.getlines(path):
            return PREFIX + f"--fix: {path} changed since the run; nothing was written"
    for path, text in texts.items():
        mode = os.stat(path).st_mode
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".diagnose-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, mode & 0o7777)
        os.replace(temporary, path)
    number = report["fixes"].index(fix) + 1
    files = ", ".join(sorted({e["file"] for e in fix["edits"]}))
    return PREFIX + f"--fix wrote fix {number} into {files} (its diff is above)"


_STOP.add(id(main.__code__))


def _run_script(script):
    edited = _EDITED.get(os.path.abspath(script))
    if edited is None:
        with open(script, "rb") as handle:
            edited = handle.read()
    code = compile(edited, script, "exec")
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=script, __builtins__=builtins, __cached__=None)
    saved, sys.modules["__main__"] = sys.modules["__main__"], module
    _MAIN["globals"] = module.__dict__
    try:
        exec(code, module.__dict__)
    finally:
        sys.modules["__main__"] = saved


def _end(state, json_path):
    state.stop()
    if isinstance(state, _Runner):
        state.unguard()
        getattr(state, "restore_env", lambda: None)()
    if json_path:
        _write_json(json_path, state.result())


def _trim_all(exc, script):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        trimmed = _trimmed(exc.__traceback__, script)
        exc.__traceback__ = (
            None
            if trimmed is None and isinstance(exc, SyntaxError)
            else (trimmed or exc.__traceback__)
        )
        exc = exc.__cause__ or exc.__context__


if __name__ == "__main__":
    sys.exit(main())
