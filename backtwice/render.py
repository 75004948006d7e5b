"""Render the page from snapshots: one self-contained HTML file. Imports no torch."""

import base64
import difflib
import hashlib
import json
import re
from dataclasses import dataclass
from html import unescape
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from . import agreement, checker, claims, diagnosis, manifest, svg, versions
from . import facts as f
from .errors import ClaimError, InputError

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
STATIC = ROOT / "static"
SCRIPTS = ("checker.js", "download.js")  # inlined as one script, allowed by its hash


# Token classes left uncoloured (names, punctuation, numbers, builtins): their spans are dropped
# to keep the page small; numbers alone were a quarter of the code blocks' markup.
PLAIN_TOKENS = re.compile(r'<span class="(?:n|p|o|w|nn|mi|mf|nb)">([^<]*)</span>')


def code_block(source, raised_line):
    """Highlight Python source, marking the line that raised."""
    formatter = HtmlFormatter(
        cssclass="hl", hl_lines=[raised_line] if raised_line else [], wrapcode=True
    )
    html = highlight(source, PythonLexer(), formatter).replace("<span></span>", "")
    # The newline goes after the marked line's span, so the next line keeps its indentation.
    html = html.replace("\n</span>", "</span>\n")
    return Markup(PLAIN_TOKENS.sub(r"\1", html))


def _used_rules(css, html):
    """Keep the highlighting rules whose token class appears in the page."""
    used = set(re.findall(r'<span class="([a-z0-9]+)">', html))
    kept = []
    for line in css.splitlines():
        found = re.match(r"\.hl \.([a-z0-9]+) \{", line)
        if found and found.group(1) in used and found.group(1) != "hll":
            kept.append(line.split(" /* ")[0])
    return "\n".join(kept)


def pygments_css(html):
    """Highlighting colours for light and dark schemes, only for the tokens the page uses."""
    light = _used_rules(HtmlFormatter(style="default").get_style_defs(".hl"), html)
    dark = _used_rules(HtmlFormatter(style="github-dark").get_style_defs(".hl"), html)
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"


def scenario_view(scenario, run, message):
    """What the page shows for one scenario: code, output, raised line, anomaly.

    The page's own message is shown in full once; a scenario raising it shows its first clause.
    """
    source = scenario.source
    raised = run.raised
    same = raised is not None and raised.message == message
    return {
        "same_message": same,
        "short": raised.message.split(" (")[0].rstrip(".") if same else None,
        "id": scenario.id,
        "title": scenario.title,
        "file": f"repro/{scenario.path.name}",
        "code": code_block(source, raised.line if raised else None),
        "outputs": [o.text for o in run.outputs],
        "raised": raised,
        "anomaly": run.anomaly,
        "expect": run.expect,
    }


def charts(snapshot):
    """Draw the graph-depth and saved-memory pictures from the snapshot's numbers."""
    detached = [row[2] for row in f.printed(snapshot, "c2_detach", "graph depth at step")]
    retained = [row[2] for row in f.printed(snapshot, "c2_retain_graph", "graph depth at step")]
    depth = svg.line_chart(
        "chart-depth",
        "Graph depth per step",
        [("retain_graph=True, no detach", "grow", retained), ("detached", "flat", detached)],
        "Step",
        "Graph depth",
    )
    rows = f.pairs(snapshot, "memory", "retain_graph")
    alive = {r["retain_graph"]: r["bytes"] / 2**20 for r in rows if "alive after backward" in r}
    memory = svg.bar_chart(
        "chart-memory",
        "Saved tensors alive after backward",
        [("retain_graph=False", "flat", alive[False]), ("retain_graph=True", "grow", alive[True])],
        "MiB",
    )
    return {
        "depth": depth,
        "memory": memory,
        "depth_rows": list(zip(range(1, len(detached) + 1), detached, retained, strict=False)),
        "memory_rows": alive,
    }


def minify_css(css):
    """Drop comments and the whitespace CSS does not need, to keep the page small."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    css = re.sub(r"\s+", " ", css)
    return re.sub(r"\s*([{};,>])\s*", r"\1", css).replace(";}", "}").strip()


def minify_js(js):
    """Drop whole-line comments, indentation and blank lines; statements keep their own lines."""
    lines = (line.strip() for line in js.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("//")) + "\n"


def json_script(data):
    """Serialise data for a <script type=...json> block; '<' escaped so it cannot close the tag."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def csp_hash(text):
    """The CSP source expression for an inline block's exact text."""
    return (
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"
    )


FAQ = (
    ("Why does calling backward twice raise this error?", ("second_backward_raises",)),
    (
        "Why does my RNN training loop raise it on the second step?",
        ("carried_raises_on_step_2", "detached_rnn_runs"),
    ),
    ("How do I train with two losses on one forward pass?", ("summed_equals_retained",)),
    ("How do I fix it in a GAN?", ("gan_generator_raises", "gan_detach_isolates_g")),
    ("Is retain_graph=True the fix?", ("inplace_follows_retain",)),
    ("Does a second backward always raise this error?", ("nosave_doubles_silently",)),
)
"""FAQ questions and the checked sentences that answer them; each must stand alone."""


def faq(snapshot, sentences):
    """schema.org FAQPage data from the captured message and the checked sentences."""
    raised = f.run(snapshot, claims.MAIN).raised

    def plain(claim_id):
        quoted = str(sentences[claim_id]).replace("<q>", "\u201c").replace("</q>", "\u201d")
        return Markup(quoted).striptags()

    qa = [
        (
            "What does 'Trying to backward through the graph a second time' mean?",
            f"It is the {raised.type} torch {snapshot.environment.torch} raises when a backward "
            "pass needs a tensor that an earlier backward pass already freed; in full it reads: "
            f"{raised.message} " + plain("two_triggers"),
        ),
        *((q, " ".join(plain(c) for c in ids)) for q, ids in FAQ),
    ]
    return {
        "@context": "https://schema.org",
        "@type": "FAQPage",
        "mainEntity": [
            {"@type": "Question", "name": q, "acceptedAnswer": {"@type": "Answer", "text": a}}
            for q, a in qa
        ],
    }


FIXES = (
    ("c1_backward_twice", "c1_fixed", "Same loss twice: keep one call.", "cause-1"),
    ("c2_no_detach", "c2_rnn_detach", "State carried into the next step: detach it.", "cause-2"),
    (
        "c3_two_backwards",
        "c3_summed",
        "Two losses, one forward pass: sum them.",
        "cause-3",
    ),
    ("c4_gan_no_detach", "c4_gan_detach", "A GAN: give D the detached fake batch.", "cause-4"),
)
"""The short answer's fixes: (raising scenario, fixed scenario, lead, section that explains)."""


def fix_lines(broken, fixed):
    """The lines that turn one source into the other, prints left out, as ('-'|'+', line)."""
    old, new = broken.splitlines(), fixed.splitlines()
    lines = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
        if tag != "equal":
            lines += [("-", line.strip()) for line in old[i1:i2] if "print(" not in line]
            lines += [("+", line.strip()) for line in new[j1:j2] if "print(" not in line]
    return lines


def fix_code(lines):
    """Show a fix's lines as a small diff: removed lines in <del>, added in <ins>."""
    tags = {"-": "del", "+": "ins"}
    return Markup("\n").join(
        Markup("<{0}>{1} {2}</{0}>").format(tags[kind], kind, line) for kind, line in lines
    )


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
        lines = fix_lines(scenarios[broken].source, scenarios[fixed].source)
        shown.append({"lead": lead, "section": section, "code": fix_code(lines)})
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


def render_page(snapshots, repro):
    """Render the page from (path, Snapshot) pairs, newest torch last; return the HTML.

    `repro` is the repro folder or a manifest.Repro already read from it.
    """
    if not isinstance(repro, manifest.Repro):
        repro = manifest.load(repro)
    agreement.check(snapshots, repro)
    scenarios = repro.scenarios
    path, snapshot = snapshots[-1]
    sentences = claims.evaluate(snapshot, path)
    try:
        pictures = charts(snapshot)
    except f.Missing as exc:
        raise InputError(path, f"{exc}; run `python build.py` to capture it again") from None
    message = f.run(snapshot, claims.MAIN).raised
    views = {s.id: scenario_view(s, snapshot.scenarios[s.id], message.message) for s in scenarios}
    fix_views = fixes(path, snapshot, {s.id: s for s in scenarios})
    data, loop_rows = checker.build(snapshot.loops) if snapshot.loops else ({}, [])
    code_html = "".join(view["code"] for view in views.values())
    css = minify_css((STATIC / "style.css").read_text(encoding="utf-8") + pygments_css(code_html))
    js = minify_js("\n".join((STATIC / name).read_text(encoding="utf-8") for name in SCRIPTS))
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    html = env.get_template("page.html.j2").render(
        env_=snapshot.environment,
        s=views,
        claims=sentences,
        message=message,
        fixes=fix_views,
        charts=pictures,
        checker=data,
        checker_json=json_script(data),
        questions=checker.QUESTIONS,
        presets=[(n, key, checker.fragment(key), sec) for n, key, sec in checker.PRESETS],
        loop_rows=loop_rows,
        faq_json=json_script(faq(snapshot, sentences)),
        matrix=versions.matrix(snapshots),
        diagnoser=diagnosis.view(snapshots, repro),
        css=Markup(css),
        js=Markup(js),
        csp=f"default-src 'none'; script-src {csp_hash(js)}; style-src {csp_hash(css)}; "
        "img-src 'none'; base-uri 'none'; form-action 'none'",
    )
    return html
