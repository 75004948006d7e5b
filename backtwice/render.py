"""Render the page from snapshots: one self-contained HTML file. Imports no torch."""

import base64
import hashlib
import json
import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from . import checker, claims, manifest, svg, versions
from . import facts as f
from .errors import InputError

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
STATIC = ROOT / "static"


def check_fresh(snapshots, repro):
    """Stop if any snapshot was captured from other repro/ sources than those on disk."""
    scenarios = manifest.load_manifest(repro)
    current = manifest.source_hashes(repro, scenarios)
    for path, snapshot in snapshots:
        for name, digest in sorted(current.items()):
            recorded = snapshot.sources.get(name)
            if recorded is None:
                raise InputError(
                    path,
                    f"field 'sources.{name}' is missing: repro/{name} is newer than this snapshot; run `python build.py` to capture it",
                )
            if recorded != digest:
                raise InputError(
                    path,
                    f"field 'sources.{name}' does not match repro/{name}, which changed since the capture; run `python build.py` to capture it again",
                )
        gone = sorted(set(snapshot.sources) - set(current))
        if gone:
            raise InputError(
                path,
                f"field 'sources.{gone[0]}' names a file repro/ no longer runs; run `python build.py` to capture it again",
            )
    return scenarios


# Token classes left uncoloured: their spans are dropped to keep the page small.
PLAIN_TOKENS = re.compile(r'<span class="(?:n|p|o|w|nn)">([^<]*)</span>')


def code_block(source, raised_line):
    """Highlight Python source, marking the line that raised."""
    formatter = HtmlFormatter(
        cssclass="hl", hl_lines=[raised_line] if raised_line else [], wrapcode=True
    )
    html = highlight(source, PythonLexer(), formatter).replace("<span></span>", "")
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


def scenario_view(scenario, run):
    """What the page shows for one scenario: code, output, raised line, anomaly."""
    source = scenario.path.read_text(encoding="utf-8")
    raised = run.raised
    return {
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


def json_script(data):
    """Serialise data for a <script type=...json> block; '<' escaped so it cannot close the tag."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def csp_hash(text):
    """The CSP source expression for an inline block's exact text."""
    return (
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"
    )


def faq(snapshot, sentences):
    """schema.org FAQPage data from the captured message and the checked sentences."""
    message = f.run(snapshot, "c1_backward_twice").raised.message

    def plain(claim_id):
        return Markup(sentences[claim_id]).striptags()

    qa = [
        (
            "What does 'Trying to backward through the graph a second time' mean?",
            f"torch {snapshot.environment.torch} raises RuntimeError: {message} "
            "A backward pass needed a value that an earlier backward pass had already freed.",
        ),
        ("Why does calling backward twice raise this error?", plain("second_backward_raises")),
        (
            "Why does my RNN training loop raise it on the second step?",
            plain("carried_raises_on_step_2") + " " + plain("detached_depth_constant"),
        ),
        ("How do I train with two losses on one forward pass?", plain("summed_equals_retained")),
        ("Is retain_graph=True the fix?", plain("memory_freed_or_kept")),
    ]
    return {
        "@context": "https://schema.org",
        "@type": "FAQPage",
        "mainEntity": [
            {"@type": "Question", "name": q, "acceptedAnswer": {"@type": "Answer", "text": a}}
            for q, a in qa
        ],
    }


def render_page(snapshots, repro):
    """Render the page from (path, Snapshot) pairs, newest torch last; return the HTML."""
    scenarios = check_fresh(snapshots, repro)
    path, snapshot = snapshots[-1]
    missing = [s.id for s in scenarios if s.id not in snapshot.scenarios]
    if missing:
        raise InputError(
            path, f"field 'scenarios.{missing[0]}' is missing; run `python build.py` to capture it"
        )
    sentences = claims.evaluate(snapshot, path)
    try:
        pictures = charts(snapshot)
    except f.Missing as exc:
        raise InputError(path, f"{exc}; run `python build.py` to capture it again") from None
    views = {s.id: scenario_view(s, snapshot.scenarios[s.id]) for s in scenarios}
    data, loop_rows = checker.build(snapshot.loops) if snapshot.loops else ({}, [])
    code_html = "".join(view["code"] for view in views.values())
    css = minify_css((STATIC / "style.css").read_text(encoding="utf-8") + pygments_css(code_html))
    js = (STATIC / "checker.js").read_text(encoding="utf-8")
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    message = f.run(snapshot, "c1_backward_twice").raised
    html = env.get_template("page.html.j2").render(
        env_=snapshot.environment,
        s=views,
        claims=sentences,
        message=message,
        charts=pictures,
        checker=data,
        checker_json=json_script(data),
        questions=checker.QUESTIONS,
        presets=[(n, key, checker.fragment(key), sec) for n, key, sec in checker.PRESETS],
        loop_rows=loop_rows,
        faq_json=json_script(faq(snapshot, sentences)),
        matrix=versions.matrix(snapshots),
        css=Markup(css),
        js=Markup(js),
        csp=f"default-src 'none'; script-src {csp_hash(js)}; style-src {csp_hash(css)}; "
        "img-src 'none'; base-uri 'none'; form-action 'none'",
    )
    return html
