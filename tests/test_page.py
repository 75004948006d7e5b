"""The built page, read as a file: one self-contained document with a strict CSP."""

import base64
import hashlib
import html
import json
import re

import pytest

from backtwice import checker
from backtwice import snapshot as snap
from backtwice.manifest import load_loop_builder, load_manifest

from .conftest import REPRO, SNAPSHOTS

BUDGET = 104_000  # the checker's real loops, each with its run fix, add about 23 KB (issue 9)


def inline(page, tag, attrs=""):
    """The text of each inline <tag{attrs}> element."""
    return re.findall(rf"<{tag}{attrs}>(.*?)</{tag}>", page, re.S)


def sha(text):
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def text_of(fragment):
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


@pytest.fixture(scope="module")
def newest():
    return snap.load_dir(SNAPSHOTS)[-1][1]


def test_size_budget(built_html):
    assert len(built_html.encode("utf-8")) <= BUDGET


def test_csp_hashes_the_inline_script_and_style(built_html):
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', built_html)
    policy = html.unescape(csp.group(1))
    (script,) = inline(built_html, "script")
    (style,) = inline(built_html, "style")
    assert policy == (
        f"default-src 'none'; script-src {sha(script)}; style-src {sha(style)}; "
        "img-src 'none'; base-uri 'none'; form-action 'none'"
    )
    assert "unsafe-inline" not in built_html
    assert '<meta name="referrer" content="no-referrer">' in built_html


def test_nothing_is_loaded_from_elsewhere(built_html):
    assert not re.search(r"\s(src|srcset|poster|data)=", built_html)
    assert "<link" not in built_html
    assert "@import" not in built_html and "url(" not in built_html
    external = re.findall(r'<a href="(https?://[^"]+)"', built_html)
    assert external == ["https://heytensor.com/research/most-common-pytorch-errors.html"]


def test_document_basics(built_html, newest):
    assert built_html.startswith('<!doctype html>\n<html lang="en">')
    assert re.search(r"<title>[^<]*torch " + re.escape(newest.environment.torch), built_html)
    for name in ('name="description"', 'property="og:title"', 'property="og:description"'):
        assert f"<meta {name} content=" in built_html


def test_sections_in_order(built_html):
    order = [
        "answer",
        "checker-section",
        "error",
        "causes",
        "cause-1",
        "cause-2",
        "cause-3",
        "cause-4",
        "saved",
        "grad",
        "retain",
        "anomaly",
        "outcomes",
        "common",
        "older",
        "provenance",
    ]
    positions = [built_html.index(f'<section id="{name}"') for name in order]
    assert positions == sorted(positions)


def test_code_blocks_are_the_repro_files(built_html):
    for scenario in load_manifest(REPRO):
        block = re.search(
            rf'<figure class="scenario" id="s-{scenario.id}">.*?<div class="hl">(.*?)</div>',
            built_html,
            re.S,
        )
        assert block, scenario.id
        shown = text_of(block.group(1))
        assert shown == scenario.path.read_text(encoding="utf-8"), scenario.id


def test_the_raising_line_is_marked_from_the_traceback(built_html, newest):
    for ident, run in newest.scenarios.items():
        block = re.search(
            rf'id="s-{ident}">.*?<div class="hl">(.*?)</div>', built_html, re.S
        ).group(1)
        marked = re.findall(
            r'<span class="hll">(.*?)</span>\n?</code>|<span class="hll">(.*?\n)</span>',
            block,
            re.S,
        )
        if run.raised is None:
            assert marked == []
        else:
            line = "".join(marked[0]).strip()
            assert text_of(line) == run.raised.code
            source_line = (REPRO / f"{ident}.py").read_text().splitlines()[run.raised.line - 1]
            assert source_line.strip() == run.raised.code


def test_every_captured_message_and_output_is_on_the_page(built_html, newest):
    page = html.unescape(built_html)
    for run in newest.scenarios.values():
        for output in run.outputs:
            assert output.text in page
        if run.raised:
            assert f"{run.raised.type}: {run.raised.message}" in page


def test_provenance_from_the_snapshot(built_html, newest):
    env = newest.environment
    section = text_of(
        re.search(r'<section id="provenance".*?</section>', built_html, re.S).group(0)
    )
    assert (
        f"Captured on {env.captured} with torch {env.torch}, Python {env.python}, {env.platform}, device {env.device}."
        in section
    )


def test_checker_data_is_the_captured_loops_deduplicated(built_html, newest):
    (raw,) = inline(built_html, "script", ' type="application/json" id="checker-data"')
    data = json.loads(raw)
    expected, _ = checker.build(newest.loops)
    assert data == json.loads(json.dumps(expected))
    assert sorted(data["results"]) == sorted(a.key for a in load_loop_builder(REPRO).all_answers())
    assert len(data["strings"]) == len(set(data["strings"]))
    message = next(r.raised.message for r in newest.loops.values() if r.raised)
    assert raw.count(message[:60]) == 1


def test_faq_block_is_built_from_captured_text(built_html, newest):
    (raw,) = inline(built_html, "script", ' type="application/ld\\+json"')
    data = json.loads(raw)
    assert data["@type"] == "FAQPage"
    first = data["mainEntity"][0]["acceptedAnswer"]["text"]
    assert newest.scenarios["c1_backward_twice"].raised.message in first
    assert newest.environment.torch in first


def test_charts_have_text_equivalents(built_html):
    for ident in ("chart-depth", "chart-memory"):
        svg = re.search(rf'<svg class="chart" id="{ident}".*?</svg>', built_html, re.S).group(0)
        assert f'aria-labelledby="{ident}-title {ident}-desc"' in svg
        assert re.search(rf'<desc id="{ident}-desc">[^<]+\d', svg)


def test_script_never_uses_innerhtml():
    js = (REPRO.parent / "static" / "checker.js").read_text(encoding="utf-8")
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js
