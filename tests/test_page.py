"""The built page, read as a file: one self-contained document with a strict CSP."""

import base64
import difflib
import gzip
import hashlib
import html
import json
import re
from html.parser import HTMLParser

import pytest

from backtwice import checker, claims, render
from backtwice import snapshot as snap
from backtwice.errors import ClaimError, PageError
from backtwice.manifest import DIAGNOSER_FILE, load_loop_builder, load_manifest

from .conftest import REPRO, SNAPSHOTS

# Issue 29: one request, at most 20 KB gzipped (python's gzip at level 9), with the checker's
# data and script inside. The diagnoser is not: the build writes it beside the page as
# diagnose.py (26.8 KB of the page gzipped when the page held its source, 45.9 KB in all).
GZIP_BUDGET = 20_480


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


def gzipped(text):
    return len(gzip.compress(text.encode("utf-8"), compresslevel=9))


def test_size_budget(built_html):
    assert gzipped(built_html) <= GZIP_BUDGET


def test_the_page_holds_no_copy_of_the_diagnoser(built_html):
    source = DIAGNOSER_FILE.read_text(encoding="utf-8")
    # Its longer lines, each one of its own: none is on the page, escaped or not.
    lines = {line.strip() for line in source.splitlines() if len(line.strip()) > 40}
    assert len(lines) > 100
    shown = html.unescape(built_html)
    assert [line for line in lines if line in shown] == []


def test_reference_summaries_are_counted_from_the_snapshot(built_html, newest):
    message = newest.scenarios[claims.MAIN].raised.message
    # The page's scenarios: the framework loops are counted on frameworks.html, by their badges.
    shown = [r for i, r in newest.scenarios.items() if not i.startswith(render.FRAMEWORKS)]
    assert 0 < len(shown) < len(newest.scenarios)
    runs = [r for r in shown if r.raised is None]
    this = [r for r in shown if r.raised and r.raised.message == message]
    other = len(shown) - len(runs) - len(this)
    summary = re.search(r'<details id="outcomes">\n<summary>(.*?)</summary>', built_html).group(1)
    assert len(this) > 1 and len(runs) > 1  # plural verbs
    raises = "1 raises" if other == 1 else f"{other} raise"
    assert summary.endswith(
        f"of the {len(shown)} scenarios, {len(this)} raise this error, {raises} "
        f"another error and {len(runs)} run."
    )
    loops = html.unescape(
        re.search(r'<details id="loops">\n<summary>(.*?)</summary>', built_html).group(1)
    )
    # Each answer combination's outcome, from its main loop and the variants its answers leave
    # open (not the non-fixes people try), classified here from the raised text alone.
    outcomes = {}
    for key, run in newest.loops.items():
        combo, _, variant = key.partition("~")
        if variant and variant not in checker.SHAPES:
            continue
        if run.raised is None:
            kind = "ran"
        elif run.raised.message.startswith(message.split(" (")[0]):
            kind = "this"
        elif "modified by an inplace operation" in run.raised.message:
            kind = "inplace"
        else:
            kind = "error"
        outcomes.setdefault(combo, set()).add(kind)
    said = {
        words: int(n)
        for n, words in re.findall(
            r"(\d+) (raise this error|raise the in-place error|raise another error|run at a cost"
            r"|run|raise or run depending on the variant)[,.]",
            loops,
        )
    }
    assert loops.startswith(f"The checker's {len(outcomes)} answer combinations")
    assert sum(said.values()) == len(outcomes)
    single = [next(iter(k)) for k in outcomes.values() if len(k) == 1]
    mixed = sum(len(k) > 1 for k in outcomes.values())
    assert said.get("raise this error", 0) == single.count("this")
    assert said.get("raise the in-place error", 0) == single.count("inplace")
    assert said.get("raise another error", 0) == single.count("error")
    # A combination whose loops all run counts as running at a cost, running, or (when one
    # variant costs and another does not) mixed; one that raises in some variant is mixed.
    ran = said.get("run at a cost", 0) + said.get("run", 0)
    assert said.get("raise or run depending on the variant", 0) >= mixed
    assert ran + said.get("raise or run depending on the variant", 0) == mixed + single.count("ran")


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
    markup = re.sub(r"<(script|style)\b([^>]*)>.*?</\1>", r"<\1\2>", built_html, flags=re.S)
    assert not re.search(r"\s(src|srcset|poster|data)=", markup)
    assert not re.search(r"\b(src|srcset|poster|data)=", " ".join(re.findall(r"<[^>]*>", markup)))
    assert "<link" not in built_html
    assert "@import" not in built_html and "url(" not in built_html
    external = re.findall(r'<a href="(https?://[^"]+)"', built_html)
    sourced = [url for _, _, url, _ in render.OLDER]
    assert sorted(external) == sorted(
        [
            "https://github.com/pytorch/pytorch/issues/13494",
            "https://github.com/pytorch/pytorch/issues/47260",
            "https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html",
            *sourced,
        ]
    )


def test_document_basics(built_html, newest):
    assert built_html.startswith('<!doctype html>\n<html lang="en">')
    assert re.search(r"<title>[^<]*torch " + re.escape(newest.environment.torch), built_html)
    for name in ('name="description"', 'property="og:title"', 'property="og:description"'):
        assert f"<meta {name} content=" in built_html


def test_sections_in_order(built_html):
    order = [
        'section id="answer"',
        'nav aria-label="Contents"',
        'section id="error"',
        'section id="checker-section"',
        'details id="loops"',
        'section id="causes"',
        'section id="cause-1"',
        'section id="cause-2"',
        'section id="cause-3"',
        'section id="cause-4"',
        'section id="saved"',
        'section id="grad"',
        'section id="anomaly"',
        'section id="retain"',
        'section id="inplace"',
        'section id="frameworks"',
        'section id="reference"',
        'details id="outcomes"',
        'p id="versions"',
        'details id="older"',
        'details id="provenance"',
        'section id="diagnoser"',
    ]
    positions = [built_html.index(f"<{name}") for name in order]
    assert positions == sorted(positions)


@pytest.fixture(scope="module")
def loops_html():
    """frameworks.html, rendered from the committed snapshots as the build writes it."""
    return render.render_pages(snap.load_dir(SNAPSHOTS), REPRO)[render.LOOPS]


@pytest.fixture(scope="module")
def site_html(built_html, loops_html):
    """Both pages' text, one after the other: each scenario's figure is on one of them."""
    return built_html + loops_html


def figure(html_text, ident):
    """One scenario's figure."""
    return re.search(
        rf'<figure class="scenario[^"]*" id="s-{ident}">(.*?)</figure>', html_text, re.S
    ).group(1)


def test_code_blocks_are_the_repro_files_or_their_changed_lines(site_html):
    sources = {s.id: s.path.read_text(encoding="utf-8") for s in load_manifest(REPRO)}
    for ident, source in sources.items():
        shown = figure(site_html, ident)
        base = render.BASES.get(ident)
        if base is None:
            block = re.search(r'<pre class="hl" tabindex="0">(.*?)</pre>', shown, re.S).group(1)
            assert text_of(block) == source, ident
            continue
        assert f'Changes from <a href="#s-{base}">repro/{base}.py</a>:' in shown, ident
        assert render.BASES.get(base) is None, f"{ident}: its base is itself a diff"
        diff = text_of(
            re.search(r'<pre class="vdiff" tabindex="0"><code>(.*?)</code></pre>', shown, re.S)[1]
        )
        new, old = source.splitlines(), sources[base].splitlines()
        kinds = []
        for line in diff.splitlines():
            found = re.match(r"^ *(\d*) ([ +\-…]) ?(.*)$", line)
            number, kind, text = found.groups()
            kinds.append(kind)
            if kind in " +":
                assert new[int(number) - 1] == text, (ident, line)
            if kind == "-":
                assert text in old and old.count(text) > new.count(text), (ident, line)
        assert "+" in kinds or "-" in kinds, ident
        # Every line of the file that the base lacks is shown.
        for number, text in enumerate(new, 1):
            if text.strip() and new.count(text) > old.count(text):
                assert re.search(rf"^ *{number} \+ ", diff, re.M), (ident, number, text)


@pytest.mark.parametrize("which", ["index.html", "frameworks.html"])
def test_no_loop_is_shown_in_full_twice(which, built_html, loops_html):
    """Each full code block differs from every other: no loop repeats with a line or two changed."""
    page = {"index.html": built_html, "frameworks.html": loops_html}[which]
    page = re.sub(r"<(script|style|head)\b.*?</\1>", " ", page, flags=re.S)
    blocks = [
        text_of(b)
        for b in re.findall(r'<pre class="hl" tabindex="0"><code>(.*?)</code>', page, re.S)
    ]
    assert len(blocks) >= 4  # a regex that matched nothing would pass it
    sources = [s.path.read_text(encoding="utf-8") for s in load_manifest(REPRO)]
    flat = html.unescape(re.sub(r"<[^>]+>", "", page))
    for source in sources:
        assert flat.count(source) <= 1
    for i, a in enumerate(blocks):
        for b in blocks[i + 1 :]:
            similar = difflib.SequenceMatcher(None, a.splitlines(), b.splitlines()).ratio()
            assert similar < 0.7, (a, b)


def test_the_raising_line_is_marked_from_the_traceback(site_html, newest):
    for ident, run in newest.scenarios.items():
        if ident in render.BASES:
            continue
        shown = figure(site_html, ident)
        block = re.search(r'<pre class="hl" tabindex="0">(.*?)</pre>', shown, re.S).group(1)
        marked = re.findall(r'<span class="hll">(.*?)</span>', block, re.S)
        if run.raised is None:
            assert marked == []
        else:
            assert len(marked) == 1 and "\n" not in marked[0]
            assert text_of(marked[0]).strip() == run.raised.code
            source_line = (REPRO / f"{ident}.py").read_text().splitlines()[run.raised.line - 1]
            assert source_line.strip() == run.raised.code


def test_every_captured_message_and_output_is_on_the_page(site_html, newest):
    page = html.unescape(site_html)
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
        r'<li><a href="#([\w-]+)">.*?<pre class="fix" tabindex="0"><code>(.*?)</code></pre>',
        section,
        re.S,
    )
    assert [where for where, _ in blocks] == [fix[3] for fix in render.FIXES]
    for (broken, fixed, _, _), (_, code) in zip(render.FIXES, blocks, strict=True):
        old = (REPRO / f"{broken}.py").read_text(encoding="utf-8").splitlines()
        new = (REPRO / f"{fixed}.py").read_text(encoding="utf-8").splitlines()
        lines = text_of(code).splitlines()
        assert any(line.startswith(("+ ", "- ")) for line in lines)
        for line in lines:
            kind, text = line[0], line[2:]
            assert kind in "-+ …"
            if kind == "-":
                assert old.count(text) > new.count(text), line
            elif kind == "+":
                assert new.count(text) > old.count(text), line
            elif kind == " ":
                assert text in old and text in new, line
            assert "print(" not in text
    text = text_of(section)
    assert f"+     {HIDDEN_LINE}" in text and "fake.detach()" in text


# The short answer's line for a carried hidden state, as the page shows it.
HIDDEN_LINE = "h = h.detach() if torch.is_tensor(h) else tuple(t.detach() for t in h)"


def test_the_hidden_state_line_detaches_an_lstm_tuple_and_an_rnncell_tensor(built_html):
    torch = pytest.importorskip("torch")
    answer = text_of(built_html[: built_html.index("</section>")])
    (line,) = [row[2:].strip() for row in answer.splitlines() if "h.detach()" in row]
    assert line == HIDDEN_LINE
    for name in ("c2_rnn_detach", "c2_lstm_detach"):  # what ran: an nn.RNNCell, an nn.LSTM
        assert f"    {HIDDEN_LINE}\n" in (REPRO / f"{name}.py").read_text(encoding="utf-8")
    nn = torch.nn
    lstm, cell = nn.LSTM(2, 4), nn.RNNCell(2, 4)
    x = torch.randn(1, 2)
    for model, h in ((lstm, lstm(x)[1]), (cell, cell(x))):
        names = {"h": h, "torch": torch}
        exec(line, names)
        after = names["h"]
        assert type(after) is type(h), model
        tensors = list(after) if isinstance(after, tuple) else [after]
        before = list(h) if isinstance(h, tuple) else [h]
        assert [t.shape for t in tensors] == [t.shape for t in before]
        assert all(t.grad_fn is None and not t.requires_grad for t in tensors)
        assert all(torch.equal(a, b) for a, b in zip(tensors, before, strict=True))
        model(x, after)  # the next step takes it as its state


def test_training_scenarios_have_a_model_and_an_optimizer_and_toys_say_so():
    for scenario in load_manifest(REPRO):
        source = scenario.path.read_text(encoding="utf-8")
        # AMP steps through its scaler: scaler.step(opt).
        real = all(part in source for part in ("nn.", "optim.", "zero_grad()", ".step("))
        assert real or scenario.title.startswith("Toy:"), scenario.id
        if scenario.title.startswith("Toy:"):
            assert "optim." not in source, scenario.id


def test_provenance_from_the_snapshot(built_html, newest):
    env = newest.environment
    section = text_of(
        re.search(r'<details id="provenance".*?</details>', built_html, re.S).group(0)
    )
    assert (
        f"Provenance: captured {env.captured} with torch {env.torch}, Python {env.python}, "
        f"on {env.platform}. Device: {env.device}." in " ".join(section.split())
    )


def test_checker_data_is_the_captured_loops_deduplicated(built_html, newest):
    (raw,) = inline(built_html, "script", ' type="application/json" id="checker-data"')
    data = json.loads(raw)
    expected, rows = checker.build(newest.loops)
    assert data == json.loads(json.dumps(checker.page_data(expected)))
    assert sorted(expected["results"]) == sorted(
        a.key for a in load_loop_builder(REPRO).combinations()
    )
    # The script reads each result's key from the table of loops: the rows in the data's order.
    ids = re.findall(r'<tr id="loop-([^"]+)">', built_html)
    assert ids == [row["key"] for row in rows] == sorted(expected["results"])
    assert data["results"] == json.loads(json.dumps([expected["results"][k] for k in ids]))
    assert len(data["strings"]) == len(set(data["strings"]))
    message = next(r.raised.message for r in newest.loops.values() if r.raised)
    # The message's first clause once, for every headline and verdict; never the message in full.
    assert raw.count(checker.first_clause(message)) == 1 and message[:60] not in raw


def test_no_structured_data_block(built_html):
    # The FAQPage block went for page weight: search engines show FAQ results only for
    # government and health sites since 2023, and it repeated the message a third time.
    assert "application/ld+json" not in built_html


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
    "detached_lstm_runs": _set(_printed("c2_lstm_detach", 1, -1), "Tensor"),
    "before_loop_raises": _set(_printed("c2_before_loop", 1, 1), 3),
    "before_loop_no_grad_runs": _set(_printed("c2_before_loop_no_grad", -1, 3), 99.0),
    "second_loss_raises": _set(_scenario("c3_two_backwards", "anomaly"), None),
    "summed_equals_retained": _set(_printed("c3_retain", 0, 3), {"tensor": [9.0, 9.0, 9.0]}),
    "gan_detach_isolates_g": _set(_printed("c4_gan_detach", 2, 3), TENSOR),
    "anomaly_from_start_names_line": _set(_scenario("anomaly_from_start", "anomaly"), None),
    "anomaly_failing_step_only": _set(
        _printed("anomaly_failing_step", -1, 1), 'Error detected in TanhBackward0. File "x", line 3'
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
    "inplace_follows_retain": _set(_printed("inplace_after_retain", -1, 1), 1),
    "scalar_saved": _set(_scenario("scalar_mul_twice", "anomaly", "code"), "loss = (w + 1).sum()"),
    "unassigned_detach_changes_nothing": _set(_printed("c2_detach_unassigned", 1, 1), 3),
    "lede": lambda d: [
        d["scenarios"][name]["raised"].update(message="Another error.")
        for name in ("c2_no_detach", "c2_detach_unassigned")
    ],
    "retain_depends_on_step": _set(
        ("loops", "later-one-rnn-retain", "raised"),
        lambda d: d["loops"]["later-one-rnn-none"]["raised"],
    ),
    "compile_retain_raises": _set(_scenario("fw_compile", "raised", "code"), "loss2.backward()"),
    "compile_message_fix": _set(
        _scenario("fw_compile", "raised", "message"),
        lambda d: d["scenarios"]["fw_compile"]["raised"]["message"].split(", or set")[0],
    ),
    "ddp_ranks_differ": _set(
        _printed("fw_ddp", 0, 5), lambda d: d["scenarios"]["fw_ddp"]["outputs"][0]["values"][3]
    ),
    "ddp_summed_agrees": _set(_printed("fw_ddp", 1, 5), {"tensor": [1.0, 2.0, 3.0]}),
    "checkpoint_reentrant_grad": _set(
        _scenario("fw_checkpoint", "raised", "message"),
        lambda d: d["scenarios"]["c1_backward_twice"]["raised"]["message"],
    ),
    "checkpoint_nonreentrant_runs": _set(
        _scenario("fw_checkpoint_fixed", "raised"),
        lambda d: d["scenarios"]["fw_checkpoint"]["raised"],
    ),
    "amp_scaled_twice_raises": _set(_scenario("fw_amp", "raised", "code"), "loss.backward()"),
}


@pytest.mark.parametrize("check", sorted(DOCTORED))
def test_each_corrected_or_new_sentence_fails_on_a_contradicting_snapshot(doctor, check):
    with pytest.raises(ClaimError, match=rf"the check '{check}' failed"):
        doctor(DOCTORED[check])


def test_every_claim_has_a_doctored_snapshot_or_an_older_test():
    older = {"retained_grads_add", "detached_depth_constant", "retained_depth_grows_by_one"}
    older |= {"summed_twice_raises", "gan_generator_raises", "create_graph_second_derivative"}
    assert {claim.id for claim in claims.CLAIMS} == set(DOCTORED) | older


def test_minified_script_drops_only_comments_and_whitespace():
    source = (
        '  // why\n  var a = 1;  /* note */ var b = a / 2\n\n  b++\n  c = x.replace(/^ +/, " // ");\n'
        "  if (a) {\n    return typeof b\n  }\n  var r = / +\\/ [/ ]/g, d = (a) / 2, e = a - -b;\n"
    )
    assert render.minify_js(source) == (
        'var a=1;var b=a/2\nb++\nc=x.replace(/^ +/," // ");if(a){return typeof b}\n'
        "var r=/ +\\/ [/ ]/g,d=(a)/2,e=a- -b;\n"
    )


def test_the_minifier_refuses_what_it_cannot_read():
    with pytest.raises(PageError, match=r"static/x\.js\(1\): holds a template literal"):
        render.minify_js("var a = `x`;\n", "x.js")
    with pytest.raises(PageError, match=r"static/x\.js\(2\): has a '/'"):
        render.minify_js("var a;\nvar b = /unclosed;\n", "x.js")


def test_minified_page_script_keeps_every_token():
    def tokens(js):
        return [t for kind, t in render.js_tokens(js) if kind not in ("comment", "space")]

    for name in render.SCRIPTS:
        source = (render.STATIC / name).read_text("utf-8")
        minified = render.minify_js(source, name)
        assert tokens(minified) == tokens(source)
        regexes = source.count(".replace(/") + source.count(".match(/")
        assert [k for k, _ in render.js_tokens(minified)].count("regex") == regexes
        assert len(minified) < 0.8 * len(source)


def test_short_names_renames_only_declared_names_never_properties_or_keys():
    source = (
        "(function () {\n  var data = load(), count = 1;\n  function show(value, b) {\n"
        "    return { value: value, size: data.size, b: b };\n  }\n  show(data, 'data');\n})();\n"
    )
    assert render.short_names(source) == (
        "(function () {\n  var a = load(), count = 1;\n  function c(value, b) {\n"
        "    return { value: value, size: a.size, b: b };\n  }\n  c(a, 'data');\n})();\n"
    )


def test_the_page_script_keeps_every_token_but_the_names_it_declares():
    for name in render.SCRIPTS:
        source = (render.STATIC / name).read_text("utf-8")
        before = [t for t in render.js_tokens(source) if t[0] not in ("comment", "space")]
        shortened = render.short_names(source, name)
        after = [t for t in render.js_tokens(shortened) if t[0] not in ("comment", "space")]
        assert [k for k, _ in after] == [k for k, _ in before]
        pairs = [(t, u) for t, u in zip(before, after, strict=True) if t != u]
        assert pairs and all(t[0] == "word" for t, _ in pairs)
        renamed = {(t[1], u[1]) for t, u in pairs}
        # One new name per old name and the other way round: no two names merge.
        assert len({a for a, _ in renamed}) == len({b for _, b in renamed}) == len(renamed)
        assert {b for _, b in renamed}.isdisjoint(t for _, t in before)


class Events(HTMLParser):
    """What a browser's parser reads: tags with their attributes, and text with references
    resolved."""

    def __init__(self, page):
        super().__init__(convert_charrefs=True)
        self.events = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.events.append(("start", tag, attrs))

    def handle_endtag(self, tag):
        self.events.append(("end", tag))

    def handle_data(self, data):
        if self.events and self.events[-1][0] == "data":
            data = self.events.pop()[1] + data
        self.events.append(("data", data))


def test_quotes_in_text_are_written_as_themselves_and_read_the_same(built_html, monkeypatch):
    monkeypatch.setattr(render, "unquote_text", lambda page: page)
    escaped = render.render_page(snap.load_dir(SNAPSHOTS), REPRO)
    assert escaped.count("&#34;") > 100 and len(built_html) < len(escaped)
    assert Events(built_html).events == Events(escaped).events
    text = re.sub(r"<(script|style)\b.*?</\1>|<[^>]*>", "", built_html, flags=re.S)
    assert "&#34;" not in text and "&#39;" not in text and '"' in text
    assert 'content="default-src &#39;none&#39;' in built_html  # attributes keep theirs


def test_text_escaping_escapes_what_a_text_node_needs():
    assert render.escape_text("a < b & c > \"d\" 'e'") == "a &lt; b &amp; c &gt; \"d\" 'e'"
    assert render.unquote_text('<a title="&#34;">&#34;x&#39;</a>') == '<a title="&#34;">"x\'</a>'
