"""Render the page from snapshots: one self-contained HTML file. Imports no torch."""

import base64
import difflib
import hashlib
import json
import re
import string
from dataclasses import dataclass, replace
from html import unescape
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from . import agreement, checker, claims, diagnosis, manifest, versions
from . import facts as f
from .errors import ClaimError, PageError

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
STATIC = ROOT / "static"
SCRIPTS = ("checker.js", "download.js", "details.js")  # inlined as one script, allowed by its hash


def code_block(source, raised_line):
    """Show Python source as it ran, marking the line that raised (no colouring: page weight)."""
    lines = [escape(line) for line in source.splitlines()]
    if raised_line:
        lines[raised_line - 1] = Markup('<span class="hll">{}</span>').format(
            lines[raised_line - 1]
        )
    return Markup('<pre class="hl" tabindex="0"><code>{}\n</code></pre>').format(
        Markup("\n").join(lines)
    )


# Scenarios shown as the lines that differ from another scenario's code, which the page shows in
# full in the section that explains it: each loop's code appears once.
BASES = {
    "c1_fixed": "c1_backward_twice",
    "scalar_mul_twice": "nosave_twice",
    "c2_rnn_detach": "c2_no_detach",
    "c2_lstm_detach": "c2_no_detach",
    "c2_before_loop_no_grad": "c2_before_loop",
    "c2_detach_unassigned": "c2_no_detach",
    "c2_retain_graph": "c2_detach",
    "c3_summed": "c3_two_backwards",
    "c3_retain": "c3_two_backwards",
    "c3_summed_twice": "c3_two_backwards",
    "c4_gan_detach": "c4_gan_no_detach",
    "grad_penalty_fixed": "grad_penalty",
    "anomaly_from_start": "c2_no_detach",
    "anomaly_failing_step": "c2_no_detach",
    "inplace_after_retain": "c2_no_detach",
    "fw_checkpoint_fixed": "fw_checkpoint",
}
FRAMEWORKS = "fw_"
"""Scenarios whose id starts so are the framework loops: shown on frameworks.html, which the
page's "In frameworks" table links, with their rows of the differences between versions; each
in full but for one whose base (BASES) is another framework loop."""
PAGE, LOOPS = "index.html", "frameworks.html"


def diff_hunks(old, new, context=1, skip=lambda line: False):
    """Lines that turn `old` into `new`, with `context` unchanged lines around each change
    that adds or removes lines; one that only rewrites lines has none (its removed lines say
    where it is: page weight), as the checker's diffs.

    Returns (kind, number in new or None, text) with kind ' ', '-', '+', or '…' between hunks.
    """
    a = [line for line in old.splitlines() if not skip(line)]
    b_numbered = [(n, line) for n, line in enumerate(new.splitlines(), 1) if not skip(line)]
    b = [line for _, line in b_numbered]
    lines = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        if lines:
            lines.append(("…", None, ""))
        if all(op[0] in ("equal", "replace") for op in group):
            group = [op for op in group if op not in (group[0], group[-1]) or op[0] != "equal"]
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [(" ", b_numbered[j][0], b[j]) for j in range(j1, j2)]
                continue
            lines += [("-", None, a[i]) for i in range(i1, i2)]
            lines += [("+", b_numbered[j][0], b[j]) for j in range(j1, j2)]
    return lines


def diff_block(lines, numbers=True):
    """A diff as HTML: removed lines in <del>, added in <ins>, new-file line numbers in front."""
    tags = {"-": "del", "+": "ins"}  # unchanged lines and gaps are plain text
    width = max((len(str(n)) for _, n, _ in lines if n), default=1)
    out = []
    for kind, number, text in lines:
        gutter = (str(number) if number else "").rjust(width) + " " if numbers else ""
        line = Markup("{0}{1} {2}").format(gutter, kind, text)
        out.append(Markup("<{0}>{1}</{0}>").format(tags[kind], line) if kind in tags else line)
    return Markup("\n").join(out)


def scenario_view(scenario, run, message, sources):
    """What the page shows for one scenario: code (or its diff from a base), output, anomaly.

    The page's own message is shown in full once; a scenario raising it shows its first clause.
    """
    source = scenario.source
    raised = run.raised
    # A framework loop, on a page of its own, shows its message in full.
    same = raised is not None and raised.message == message
    same = same and not scenario.id.startswith(FRAMEWORKS)
    base = BASES.get(scenario.id)
    return {
        "same_message": same,
        "short": raised.message.split(" (")[0].rstrip(".") if same else None,
        "id": scenario.id,
        "title": scenario.title,
        "file": f"repro/{scenario.path.name}",
        "base": base,
        "code": code_block(source, raised.line if raised else None)
        if base is None
        else diff_block(diff_hunks(sources[base], source, context=0)),
        "outputs": [o.text for o in run.outputs],
        "raised": raised,
        "anomaly": run.anomaly,
        "expect": run.expect,
    }


def minify_css(css):
    """Drop comments and the whitespace CSS does not need, to keep the page small."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    css = re.sub(r"\s+", " ", css)
    css = re.sub(r"\s*([{};,>])\s*", r"\1", css)
    # After a colon only: a space before one can be a descendant combinator ("a :hover").
    return re.sub(r":\s+", ":", css).replace(";}", "}").strip()


# JavaScript tokens: a comment, a string, whitespace, a word, or one punctuation character; a
# '/' that starts a regular expression literal is told apart from division by the token before.
JS_TOKEN = re.compile(
    r"""//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|\s+|[\w$]+|.""", re.S
)
JS_REGEX = re.compile(r"/(?:[^/\\\n\[]|\\.|\[(?:[^\]\\\n]|\\.)*\])+/[a-z]*")
REGEX_AFTER = {"return", "typeof", "case", "do", "else", "in", "instanceof", "new", "delete"}
WORDY = re.compile(r"[\w$]")
# A line break after these, or before those, never ends a statement: it can go.
NO_BREAK_AFTER = set("{;,([:?=&|!<>*")
NO_BREAK_BEFORE = set("})].,;:?")


def js_tokens(js, name="script"):
    """Split JavaScript into (kind, text): comment, string, regex, space, word or other."""
    pos, before = 0, None  # before: the last token that is not a comment or whitespace
    while pos < len(js):
        if js[pos] == "`":
            line = js.count("\n", 0, pos) + 1
            raise PageError(
                STATIC / name,
                "holds a template literal, which the minifier does not "
                "read; write a string instead",
                line,
            )
        starts_regex = js[pos] == "/" and js[pos + 1 : pos + 2] not in ("/", "*")
        if starts_regex and (
            before is None
            or (before[0] == "other" and before[1] not in ")]")
            or (before[0] == "word" and before[1] in REGEX_AFTER)
        ):
            found, kind = JS_REGEX.match(js, pos), "regex"
            if found is None:
                line = js.count("\n", 0, pos) + 1
                raise PageError(STATIC / name, "has a '/' the minifier cannot read", line)
        else:
            found = JS_TOKEN.match(js, pos)
            text = found.group(0)
            if text.startswith(("//", "/*")):
                kind = "comment"
            elif text[0] in "\"'":
                kind = "string"
            else:
                kind = "space" if text.isspace() else "word" if WORDY.match(text) else "other"
        yield kind, found.group(0)
        if kind not in ("comment", "space"):
            before = (kind, found.group(0))
        pos = found.end()


def minify_js(js, name="script"):
    """Drop comments and the whitespace JavaScript does not need; a line break stays where
    automatic semicolon insertion could need it, and strings and regexes are kept as written."""
    out = []
    gap = ""  # the whitespace (or comment) since the last token written
    for kind, text in js_tokens(js, name):
        if kind in ("comment", "space"):
            gap += "\n" if "\n" in text else " "
            continue
        if out and gap:
            last, first = out[-1][-1], text[0]
            if "\n" in gap and last not in NO_BREAK_AFTER and first not in NO_BREAK_BEFORE:
                out.append("\n")
            elif (WORDY.match(last) and WORDY.match(first)) or last + first in (
                "++",
                "--",
                "//",
                "/*",
            ):
                out.append(" ")
        out.append(text)
        gap = ""
    return "".join(out) + "\n"


def _declared(words):
    """Names a script declares: after var or function, and each function's parameters."""
    found, params = set(), False
    for i, (kind, text) in enumerate(words):
        before = words[i - 1][1] if i else ""
        if kind == "word" and (before in ("var", "function") or params):
            found.add(text)
        if text == "(" and "function" in (before, words[i - 2][1] if i > 1 else ""):
            params = True
        elif text == ")":
            params = False
    return found


def short_names(js, name="script"):
    """Rename the names a script declares to one or two letters (page weight). A name ever read
    as a property (after '.') or written as an object key (before ':') keeps its spelling, and no
    new name is one the script already uses, so every reference still means what it meant."""
    tokens = list(js_tokens(js, name))
    words = [t for t in tokens if t[0] not in ("comment", "space")]
    used = {text for kind, text in words if kind == "word"}
    kept = {
        text
        for i, (kind, text) in enumerate(words)
        if kind == "word"
        and ((i and words[i - 1][1] == ".") or (i + 1 < len(words) and words[i + 1][1] == ":"))
    }
    counts = {}
    for _, text in words:
        counts[text] = counts.get(text, 0) + 1
    order = sorted(_declared(words) - kept, key=lambda w: (-counts[w] * len(w), w))
    letters = string.ascii_letters
    names = [*letters, *(a + b for a in letters for b in letters)]
    free = (n for n in names if n not in used and n not in ("do", "if", "in"))  # keywords
    table = {w: next(free) for w in order if len(w) > 1}
    return "".join(table.get(t, t) if k == "word" else t for k, t in tokens)


# The page as tokens: raw-text elements (kept whole), comments, tags, and the text between them.
# Attribute values never hold a raw '>' (autoescape writes &gt;), so a tag ends at the first '>'.
TOKENS = re.compile(r"<(script|style)\b[^>]*>.*?</\1>|<!--.*?-->|<[^>]*>|[^<]+", re.S)
QUOTES = re.compile(r"&#34;|&#39;")


def escape_text(text):
    """Text as the page writes it in a text node: escaped, then its quotes put back by
    unquote_text(), so that '&', '<' and '>' only are escaped; one rule for page and checks."""
    return unquote_text(str(escape(text)))


def unquote_text(html):
    """Write quotes in text nodes as themselves; autoescape writes them as &#34; and &#39;, which
    only attribute values need (they keep them)."""
    out = []
    for token in TOKENS.finditer(html):
        part = token.group(0)
        if part[0] != "<":
            part = QUOTES.sub(lambda m: '"' if m.group(0) == "&#34;" else "'", part)
        out.append(part)
    return "".join(out)


def json_script(data):
    """Serialise data for a <script type=...json> block; '<' escaped so it cannot close the tag."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def csp_hash(text):
    """The CSP source expression for an inline block's exact text."""
    return (
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"
    )


FIXES = (
    (
        "c1_backward_twice",
        "c1_fixed",
        "The same loss twice: keep one <code>loss.backward()</code> per step.",
        "cause-1",
    ),
    (
        "c2_no_detach",
        "c2_rnn_detach",
        "A hidden state carried into the next step: detach it at the end of each step.",
        "cause-2",
    ),
    (
        "c2_before_loop",
        "c2_before_loop_no_grad",
        "A tensor computed before the loop, by a model not trained: <code>no_grad()</code>.",
        "s-c2_before_loop",
    ),
    (
        "c3_two_backwards",
        "c3_summed",
        "Two losses on one forward pass: add them, then one <code>backward()</code>.",
        "cause-3",
    ),
    (
        "c4_gan_no_detach",
        "c4_gan_detach",
        "A GAN: the discriminator's loss takes <code>fake.detach()</code>.",
        "cause-4",
    ),
    (
        "grad_penalty",
        "grad_penalty_fixed",
        "A gradient penalty: <code>create_graph=True</code> in <code>autograd.grad</code>.",
        "grad",
    ),
)
"""The short answer's fixes: (raising scenario, fixed scenario, lead, section that explains)."""


def is_print(line):
    """Whether a source line only prints (left out of the short answer's fixes)."""
    return line.strip().startswith("print(")


def fixes(path, snapshot, scenarios):
    """The short answer's fixes, each from a scenario that raised and its fix that ran."""
    shown = []
    for broken, fixed, lead, section in FIXES:
        if snapshot.scenarios[broken].raised is None or snapshot.scenarios[fixed].raised:
            raise ClaimError(
                path,
                "section 'answer': the fix",
                f"{broken} should raise and {fixed} should run",
                f"{lead} (shown as the change from {broken} to {fixed})",
                "rewrite FIXES in backtwice/render.py",
            )
        lines = diff_hunks(scenarios[broken].source, scenarios[fixed].source, skip=is_print)
        shown.append(
            {"lead": Markup(lead), "section": section, "code": diff_block(lines, numbers=False)}
        )
    return shown


WORD = re.compile(r"\w")
HIDDEN = re.compile(r"<(pre|table|svg|script|style|head|figure)\b.*?</\1>", re.S)


@dataclass(frozen=True)
class PageStats:
    """What the build reports about the page's text."""

    words: int
    """Prose words in <main>, outside code blocks and their captions, tables and charts."""
    messages: int
    """How often the full message appears in the visible page (scripts and head excluded)."""


def visible_text(html):
    """The prose a reader sees: code blocks (figures), tables, charts, scripts and head removed."""
    return unescape(re.sub(r"<[^>]+>", " ", HIDDEN.sub(" ", html)))


def page_stats(html):
    """Count the prose words and the full message's occurrences in the rendered page."""
    found = re.search(r'<blockquote class="message"><p>(.*?)</p></blockquote>', html, re.S)
    message = unescape(found.group(1)) if found else ""
    main = html[html.index("<main") : html.index("</main>")]
    words = [w for w in visible_text(main).split() if WORD.search(w)]
    body = re.sub(r"<(script|style|head)\b.*?</\1>", " ", html, flags=re.S)
    flat = " ".join(unescape(re.sub(r"<[^>]+>", "", body)).split())
    return PageStats(len(words), flat.count(" ".join(message.split())) if message else 0)


OLDER = (
    (
        "0.1",
        "Trying to backward through the graph second time, but the buffers have already been "
        "freed. Please specify retain_variables=True when calling backward for the first time.",
        "https://github.com/pytorch/pytorch/issues/1288",
        "pytorch#1288",
    ),
    (
        "0.2 to 1.5",
        "Trying to backward through the graph a second time, but the buffers have already been "
        "freed. Specify retain_graph=True when calling backward the first time.",
        "https://github.com/pytorch/pytorch/issues/30297",
        "pytorch#30297",
    ),
    (
        "1.6 to 1.7",
        "Trying to backward through the graph a second time, but the saved intermediate results "
        "have already been freed. Specify retain_graph=True when calling backward the first time.",
        "https://github.com/JonathonLuiten/instant-nerf-pytorch/issues/2",
        "instant-nerf-pytorch#2 (torch 1.7.1)",
    ),
    (
        "1.8",
        "Trying to backward through the graph a second time, but the saved intermediate results "
        "have already been freed. Specify retain_graph=True when calling .backward() or "
        "autograd.grad() the first time.",
        "https://github.com/pytorch/pytorch/issues/46588",
        "pytorch#46588",
    ),
    (
        "1.9",
        "Trying to backward through the graph a second time (or directly access saved variables "
        "after they have already been freed).",
        "https://github.com/cvxgrp/osmm/issues/2",
        "osmm#2",
    ),
)
"""Older wordings, sourced, not captured: each as a public report quotes it, with its link."""

VERDICT_WORDS = {
    "raises": "raise this error",
    "inplace": "raise the in-place error",
    "error": "raise another error",
    "costs": "run at a cost",
    "runs": "run",
    "mixed": "raise or run depending on the variant",
}


def _count(items):
    return {item: items.count(item) for item in dict.fromkeys(items)}


def _verb(n, verb):
    """'1 raises', '3 raise': a count and its verb."""
    return f"{n} {verb}s" if n == 1 else f"{n} {verb}"


def reference(path, snapshots, views, message, loop_rows):
    """The one-sentence summaries of the reference tables, each counted from the snapshots."""
    env = snapshots[-1][1].environment
    outcomes = _count(
        [
            "run" if not v["raised"] else "this" if v["raised"].message == message else "other"
            for v in views.values()
        ]
    )
    kinds = _count([row["verdict"]["kind"] for row in loop_rows])
    loops = [f"{n} {VERDICT_WORDS[kind]}" for kind, n in kinds.items()]
    for other_path, snapshot in snapshots:
        said = f.run(snapshot, claims.MAIN).raised
        if said is None or said.message != message:
            raise ClaimError(
                other_path,
                "section 'older': the check 'same_wording'",
                f"torch {snapshot.environment.torch} raised other text",
                "since 1.10 it reads as captured here",
            )
    torches = versions.join([s.environment.torch for _, s in snapshots])
    return {
        "outcomes": f"Every outcome on torch {torches}: of the {len(views)} scenarios, "
        f"{_verb(outcomes.get('this', 0), 'raise')} this error, "
        f"{_verb(outcomes.get('other', 0), 'raise')} another error and "
        f"{_verb(outcomes.get('run', 0), 'run')}.",
        "loops": f"The checker's {len(loop_rows)} answer combinations, with outcomes and fixes: "
        + ", ".join(loops)
        + ".",
        "older": Markup(
            "Older wordings, quoted in public reports: {} from torch 0.1 to 1.9; "
            "since 1.10 it reads as captured here on torch {}."
        ).format(len(OLDER), torches),
        "provenance": f"Provenance: captured {env.captured} with torch {env.torch}, "
        f"Python {env.python}, on {env.platform}.",
    }


def outcome_table(snapshots, message, order):
    """The scenarios whose outcome or text differs between torch versions, with each version's
    outcome: 'raises' (this error), 'other' (another error) or 'runs', '*' where the text differs
    from the newest version's. A scenario alike on every version is left out: its figure shows
    its outcome, and the summary above the table says that the rest agree."""
    newest = snapshots[-1][1]
    rows = []
    for ident in order:
        latest = newest.scenarios[ident]
        cells = []
        for _, snapshot in snapshots:
            run = snapshot.scenarios.get(ident)
            if run is None:
                cells.append("absent")
            elif run.raised is None:
                cells.append("runs")
            else:
                kind = latest.raised or run.raised
                word = "raises" if kind.message == message else "other"
                differs = latest.raised is not None and latest.raised.message != run.raised.message
                cells.append(word + ("*" if differs else ""))
        if len(set(cells)) > 1 or "*" in "".join(cells):
            rows.append({"id": ident, "cells": cells})
    return {"versions": [s.environment.torch for _, s in snapshots], "rows": rows}


def only(snapshots, keep, loops):
    """The (path, Snapshot) pairs with the scenarios whose id `keep` accepts, and with their
    checker loops or none: what one page says about torch versions is of what it shows."""
    return [
        (
            path,
            replace(
                snapshot,
                scenarios={i: run for i, run in snapshot.scenarios.items() if keep(i)},
                loops=snapshot.loops if loops else {},
            ),
        )
        for path, snapshot in snapshots
    ]


def by_version(snapshots, message, ids, loops):
    """The version matrix (None for one snapshot) and the table of outcomes that differ, of the
    scenarios `ids`, in that order (and of the checker loops, if `loops`)."""
    shown = only(snapshots, set(ids).__contains__, loops)
    return versions.matrix(shown), outcome_table(shown, message, ids)


def environment():
    """The templates' Jinja environment."""
    return Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


CSP = "default-src 'none'; {}style-src {}; img-src 'none'; base-uri 'none'; form-action 'none'"


def render_page(snapshots, repro):
    """Render the page (index.html) from (path, Snapshot) pairs, newest torch last."""
    return render_pages(snapshots, repro)[PAGE]


@dataclass(frozen=True)
class Shared:
    """What both pages are rendered from."""

    path: Path
    """The newest snapshot's file, which the pages lead with."""
    snapshot: object
    """That snapshot (snapshot.Snapshot)."""
    message: object
    """The page's error as it raised there (snapshot.Raised)."""
    views: dict
    """Each scenario's view (scenario_view), by id, in repro/scenarios.toml's order."""
    css: str
    """The stylesheet, minified; both pages inline it."""


def render_pages(snapshots, repro):
    """Render the page and the framework loops' page from (path, Snapshot) pairs, newest torch
    last; return {file name: HTML}.

    `repro` is the repro folder or a manifest.Repro already read from it.
    """
    if not isinstance(repro, manifest.Repro):
        repro = manifest.load(repro)
    agreement.check(snapshots, repro)
    path, snapshot = snapshots[-1]
    if claims.MAIN not in snapshot.scenarios:
        raise PageError(
            repro.folder / "scenarios.toml",
            f"declares no scenario '{claims.MAIN}', whose error the page leads with; declare"
            " it again (as the project's repro/scenarios.toml does)",
        )
    message = f.run(snapshot, claims.MAIN).raised
    sources = {s.id: s.source for s in repro.scenarios}
    views = {
        s.id: scenario_view(s, snapshot.scenarios[s.id], message.message, sources)
        for s in repro.scenarios
    }
    css = minify_css((STATIC / "style.css").read_text(encoding="utf-8"))
    shared = Shared(path, snapshot, message, views, css)
    env = environment()
    return {
        PAGE: unquote_text(main_page(env, shared, snapshots, repro)),
        LOOPS: unquote_text(loops_page(env, shared, snapshots)),
    }


def main_page(env, shared, snapshots, repro):
    """index.html: every scenario but the framework loops, the checker and the diagnoser."""
    path, snapshot, message = shared.path, shared.snapshot, shared.message.message
    sentences = claims.evaluate(snapshot, path)
    shown = {i: v for i, v in shared.views.items() if not i.startswith(FRAMEWORKS)}
    data, loop_rows = checker.build(snapshot.loops) if snapshot.loops else ({}, [])
    js = "".join(
        minify_js(short_names((STATIC / name).read_text(encoding="utf-8"), name), name)
        for name in SCRIPTS
    )
    matrix, table = by_version(snapshots, message, list(shown), True)
    # Its sentences count the scenarios it shows; the diagnoser is checked on all.
    diagnoser = diagnosis.view(snapshots, repro)
    here = only(snapshots, shown.__contains__, True)
    diagnoser = {**diagnoser, "versions": diagnosis.versions_sentence(here)}
    return env.get_template("page.html.j2").render(
        env_=snapshot.environment,
        s=shared.views,
        claims=sentences,
        message=shared.message,
        fixes=fixes(path, snapshot, {s.id: s for s in repro.scenarios}),
        checker=data,
        checker_json=json_script(checker.page_data(data) if data else data),
        questions=checker.QUESTIONS,
        presets=[(n, key, checker.fragment(key), sec) for n, key, sec in checker.PRESETS],
        loop_rows=loop_rows,
        matrix=matrix,
        ref=reference(path, snapshots, shown, message, loop_rows),
        older=OLDER,
        outcome_table=table,
        diagnoser=diagnoser,
        css=Markup(shared.css),
        js=Markup(js),
        csp=CSP.format(f"script-src {csp_hash(js)}; ", csp_hash(shared.css)),
    )


def loops_page(env, shared, snapshots):
    """frameworks.html: the framework loops in full, and how they differ between versions;
    no script."""
    loops = [i for i in shared.views if i.startswith(FRAMEWORKS)]
    matrix, table = by_version(snapshots, shared.message.message, loops, False)
    return env.get_template("frameworks.html.j2").render(
        env_=shared.snapshot.environment,
        s=shared.views,
        loops=loops,
        matrix=matrix,
        outcome_table=table,
        css=Markup(shared.css),
        csp=CSP.format("", csp_hash(shared.css)),
    )
