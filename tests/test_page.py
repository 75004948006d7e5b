"""The built page, read as a file: one self-contained document with a strict CSP."""

import base64
import hashlib
import html
import json
import re

import pytest

from backtwice import checker, claims, render
from backtwice import snapshot as snap
from backtwice.errors import ClaimError
from backtwice.manifest import load_loop_builder, load_manifest

from .conftest import REPRO, SNAPSHOTS

# 80 KB until issue 11 turned the scenarios into training steps with models and optimizers and
# added seven facts, each shown with its code (93 KB), and issue 9 gave the checker real loops,
# each with its run fix (121,183 bytes with both). Issue 11's editing pass brought it to 105,716
# bytes (uncoloured numbers, compact checker diffs and sentences, minified script, shorter prose);
# the diagnoser section adds 48 KB: its prose and its whole source (about 850 lines, collapsed).
# + 13 KB: the diagnoser of issues 17/19 is 51 KB of source, not 35 (the page branch replaces this
# budget with a gzipped one).
BUDGET = 105_716 + 48_000 + 13_000


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
        "error",
        "checker-section",
        "anomaly",
        "causes",
        "cause-1",
        "cause-2",
        "cause-3",
        "cause-4",
        "saved",
        "grad",
        "retain",
        "inplace",
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
            rf'<figure class="scenario[^"]*" id="s-{scenario.id}">.*?<div class="hl">(.*?)</div>',
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
        marked = re.findall(r'<span class="hll">(.*?)</span>(?=\n|</code>)', block, re.S)
        if run.raised is None:
            assert marked == []
        else:
            assert len(marked) == 1 and "\n" not in marked[0]
            line = marked[0].strip()
            assert text_of(line) == run.raised.code
            source_line = (REPRO / f"{ident}.py").read_text().splitlines()[run.raised.line - 1]
            assert source_line.strip() == run.raised.code


def test_every_captured_message_and_output_is_on_the_page(built_html, newest):
    page = html.unescape(built_html)
    for run in newest.scenarios.values():
        for output in run.outputs:
            assert output.text in page
        if run.raised:
            assert f"{run.raised.type}: {run.raised.message}" in page or (
                run.raised.message in page
                and f"{run.raised.type}: {run.raised.message.split(' (')[0]} …" in page
            )


def test_page_stats_counts_prose_and_messages_independently():
    message = "Trying to backward (or not). Twice."
    page = (
        "<html><head><title>Trying to backward (or not). Twice.</title></head><body><main>"
        f'<p>One two, three.</p><blockquote class="message"><p>{message}</p></blockquote>'
        "<pre>not prose at all</pre><table><tr><td>nor this</td></tr></table>"
        '<figure class="scenario"><figcaption>a title</figcaption></figure>'
        "<p>Four &amp; <code>five()</code></p></main>"
        f'<script type="application/json">"{message}"</script><p>{message}</p></body></html>'
    )
    stats = render.page_stats(page)
    # Prose: "One two, three." (3) + the message (6) + "Four & five()" (2; "&" has no letter).
    assert stats == render.PageStats(words=11, messages=2)


def test_prose_under_1600_words_and_the_message_at_most_twice(built_html, newest):
    stats = render.page_stats(built_html)
    message = newest.scenarios["c1_backward_twice"].raised.message
    visible = re.sub(r"<(script|style|head)\b.*?</\1>", " ", built_html, flags=re.S)
    assert html.unescape(re.sub(r"<[^>]+>", "", visible)).count(message) == stats.messages
    assert 1 <= stats.messages <= 2
    assert 1000 < stats.words < 1600


def test_short_answer_shows_each_fix_as_the_lines_that_changed(built_html):
    section = re.search(r'<section id="answer".*?</section>', built_html, re.S).group(0)
    blocks = re.findall(
        r'<a href="#(cause-\d)">.*?<pre class="fix"><code>(.*?)</code></pre>', section, re.S
    )
    assert [cause for cause, _ in blocks] == ["cause-1", "cause-2", "cause-3", "cause-4"]
    for (broken, fixed, _, _), (_, code) in zip(render.FIXES, blocks, strict=True):
        old = (REPRO / f"{broken}.py").read_text(encoding="utf-8").splitlines()
        new = (REPRO / f"{fixed}.py").read_text(encoding="utf-8").splitlines()
        lines = text_of(code).splitlines()
        assert lines
        for line in lines:
            kind, text = line[0], line[2:]
            assert kind in "-+"
            removed = old.count(text) > new.count(text) if kind == "-" else False
            added = new.count(text) > old.count(text) if kind == "+" else False
            stripped = [source.strip() for source in (old if kind == "-" else new)]
            assert removed or added or text in stripped, line
    assert "h = h.detach()" in text_of(section)
    assert "fake.detach()" in text_of(section)


def test_training_scenarios_have_a_model_and_an_optimizer_and_toys_say_so():
    for scenario in load_manifest(REPRO):
        source = scenario.path.read_text(encoding="utf-8")
        real = all(part in source for part in ("nn.", "optim.", "zero_grad()", ".step()"))
        assert real or scenario.title.startswith("Toy:"), scenario.id
        if scenario.title.startswith("Toy:"):
            assert "optim." not in source, scenario.id


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
    for entry in data["mainEntity"]:
        answer = entry["acceptedAnswer"]["text"]
        assert answer[0].isupper() and answer.endswith((".", ")")), answer
        assert not re.search(r"\bline \d|\babove\b|\bbelow\b|\bhere\b|<", answer), answer


def test_charts_have_text_equivalents(built_html):
    for ident in ("chart-depth", "chart-memory"):
        svg = re.search(rf'<svg class="chart" id="{ident}".*?</svg>', built_html, re.S).group(0)
        assert f'aria-labelledby="{ident}-title {ident}-desc"' in svg
        assert re.search(rf'<desc id="{ident}-desc">[^<]+\d', svg)


def test_script_never_uses_innerhtml():
    js = (REPRO.parent / "static" / "checker.js").read_text(encoding="utf-8")
    assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "document.write" not in js


def _set(path, value):
    """A change that sets data[path...] = value on a snapshot's JSON data."""

    def change(data):
        *parents, last = path
        node = data
        for key in parents:
            node = node[key]
        node[last] = value(data) if callable(value) else value

    return change


def _scenario(name, *path):
    return ("scenarios", name, *path)


def _printed(name, index, position):
    return _scenario(name, "outputs", index, "values", position)


TENSOR = {"tensor": [1.0, 2.0], "dtype": "float32"}
DOCTORED = {
    "two_triggers": _set(_scenario("saved_tensors", "raised", "code"), "loss.backward()"),
    "second_backward_raises": _set(
        _scenario("c1_backward_twice", "raised", "code"), "loss1.backward()"
    ),
    "one_call_trains": _set(_printed("c1_fixed", -1, 3), 99.0),
    "nosave_doubles_silently": _set(_printed("nosave_twice", 1, 1), TENSOR),
    "carried_raises_on_step_2": _set(_printed("c2_no_detach", 1, 1), 3),
    "detached_rnn_runs": _set(
        _scenario("c2_rnn_detach", "raised"), lambda d: d["scenarios"]["c2_no_detach"]["raised"]
    ),
    "second_loss_raises": _set(_scenario("c3_two_backwards", "anomaly"), None),
    "summed_equals_retained": _set(_printed("c3_retain", 0, 3), {"tensor": [9.0, 9.0, 9.0]}),
    "gan_detach_isolates_g": _set(_printed("c4_gan_detach", 2, 3), TENSOR),
    "anomaly_from_start_names_line": _set(_scenario("anomaly_from_start", "anomaly"), None),
    "anomaly_failing_step_only": _set(
        _printed("anomaly_failing_step", 0, 1), 'Error detected in TanhBackward0. File "x", line 3'
    ),
    "anomaly_names_first_freed_node": _set(
        _scenario("c3_summed_twice", "anomaly"),
        lambda d: d["scenarios"]["c3_two_backwards"]["anomaly"],
    ),
    "saved_what_mul_needs": _set(_printed("saved_tensors", 2, 1), TENSOR),
    "held_tensor_stays": _set(_printed("saved_tensors", 3, 1), {"tensor": [0.0, 0.0]}),
    "grad_twice_raises": _set(_scenario("grad_penalty", "raised", "code"), "opt.step()"),
    "create_graph_then_backward_runs": _set(
        _scenario("grad_penalty_fixed", "raised"),
        lambda d: d["scenarios"]["grad_penalty"]["raised"],
    ),
    "jacobian_rows_run": _set(
        _scenario("jacobian_rows", "raised"), lambda d: d["scenarios"]["grad_twice"]["raised"]
    ),
    "memory_freed_or_kept": _set(_printed("memory", 1, 3), 1),
    "memory_device": _set(_printed("memory", -1, 1), "cuda"),
    "inplace_follows_retain": _set(_printed("inplace_after_retain", -1, 1), 2),
}


@pytest.mark.parametrize("check", sorted(DOCTORED))
def test_each_corrected_or_new_sentence_fails_on_a_contradicting_snapshot(doctor, check):
    with pytest.raises(ClaimError, match=rf"the check '{check}' failed"):
        doctor(DOCTORED[check])


def test_every_claim_has_a_doctored_snapshot_or_an_older_test():
    older = {"retained_grads_add", "detached_depth_constant", "retained_depth_grows_by_one"}
    older |= {"summed_twice_raises", "gan_generator_raises", "create_graph_second_derivative"}
    assert {claim.id for claim in claims.CLAIMS} == set(DOCTORED) | older


def test_minified_script_drops_only_comment_lines_indentation_and_blanks():
    assert render.minify_js("  // why\n  var a = 1;  // keep\n\n}\n") == "var a = 1;  // keep\n}\n"
