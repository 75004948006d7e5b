"""The checker in a real Chromium: every combination, its variants, presets, keyboard, phone."""

import re

import pytest
from playwright.sync_api import Page, expect

from backtwice import checker
from backtwice import snapshot as snap
from backtwice.checker import fragment
from backtwice.manifest import load_loop_builder

from .conftest import REPRO, SNAPSHOTS

pytestmark = pytest.mark.browser
NAMES = checker.NAMES
BUILDER = load_loop_builder(REPRO)
COMBOS = [a.key for a in BUILDER.combinations()]
LOOPS = snap.load_dir(SNAPSHOTS)[-1][1].loops
"""The newest committed snapshot's loops: each result is checked against its runs."""
THIS = "Trying to backward through the graph a second time"
INPLACE = "modified by an inplace operation"


@pytest.fixture(scope="module")
def expected():
    """The checker's data derived in Python from the committed snapshot."""
    data, _ = checker.build(LOOPS)
    return data


HEADLINES = {row["key"]: row["verdict"]["headline"] for row in checker.build(LOOPS)[1]}
"""Each combination's headline, derived in Python: the page's table of loops holds it."""


def joined(data, pieces):
    return None if pieces == "" else "".join(data["strings"][int(i)] for i in pieces.split())


def capital(text):
    return text[0].upper() + text[1:]


def answers(key):
    return dict(zip(NAMES, checker.split_key(key)[0], strict=True))


def variants(key):
    """The loop keys captured for a combination: its main loop first, then its variants."""
    found = [a for a in BUILDER.all_answers() if a.combo == key]
    return [
        a.key
        for a in sorted(
            found,
            key=lambda a: (a.variant != "", checker.ORDER.index(a.variant) if a.variant else 0),
        )
    ]


def answer(page, key, on_the_way=None):
    """Answer the four questions for a combination; call on_the_way() after each new answer."""
    for name, value in answers(key).items():
        radio = page.locator(f"input[name='{name}'][value='{value}']")
        if not radio.is_checked():
            radio.check()
            if on_the_way:
                on_the_way()


def diff_text(old, new, context=checker.CONTEXT):
    """A diff as the page shows it, computed here from the two sources with difflib's opcodes."""
    import difflib

    a, b = old.splitlines(), new.splitlines()
    out = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        if out:
            out.append("\u22ef\n")
        if {tag for tag, *_ in group} <= {"equal", "replace"}:  # a rewrite: no context around it
            group = [op for op in group if op[0] != "equal" or op not in (group[0], group[-1])]
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [f"  {line}\n" for line in a[i1:i2]]
            else:
                out += [f"- {line}\n" for line in a[i1:i2]] + [f"+ {line}\n" for line in b[j1:j2]]
    return "".join(out)


def assert_result(page, data, key):
    """The result box shows exactly the combination's data, and its diffs are the loops' diffs."""
    result = checker.unpacked(data["results"][key])
    box = page.locator("#result")
    expect(box).to_have_class(result["kind"])
    expect(box.locator("h3")).to_have_text(HEADLINES[key])
    note = box.locator("p.note")
    expect(note).to_have_count(0 if result["n"] is None else 1)
    blocks = box.locator("div.variant")
    expect(blocks).to_have_count(len(result["b"]))
    shown = [k for k in variants(key) if k.partition("~")[2] not in checker.DEAD_ENDS]
    for i, (block, loop_key) in enumerate(zip(result["b"], shown, strict=True)):
        part = blocks.nth(i)
        run = LOOPS[loop_key]
        if block["l"]:
            expect(part.locator("h4")).to_have_text(capital(joined(data, block["l"])) + ":")
        # No exact text: the headline or the verdict quotes the message's first clause.
        expect(part.locator("dl, dd")).to_have_count(0)
        if run.raised is not None:
            said = HEADLINES[key] + " " + (joined(data, block["v"]) or "")
            assert checker.first_clause(run.raised.message) in said, (key, i)
        if block["v"]:
            expect(part.locator("p:not(.fix):not(.fixed)")).to_have_text(
                capital(joined(data, block["v"])) + "."
            )
        if block["f"]:
            edits = [data["strings"][int(i)] for i in block["f"].split()]
            expect(part.locator("p.fix")).to_have_text("Fix: " + "; ".join(edits) + ".")
            assert part.locator("pre.diff").text_content() == diff_text(run.source, run.fix.source)
        else:
            expect(part.locator("pre.diff")).to_have_count(0)
    tried = box.locator(".tried li")
    dead = [k for k in variants(key) if k.partition("~")[2] in checker.DEAD_ENDS]
    expect(tried).to_have_count(len(dead))
    for i, loop_key in enumerate(dead):
        item = tried.nth(i)
        entry = result["t"][i]
        expect(item).to_contain_text(
            data["strings"][entry["l"]] + ": " + joined(data, entry["v"]) + "."
        )
        assert item.locator("pre.diff").text_content() == diff_text(
            LOOPS[key].source, LOOPS[loop_key].source, 1
        )
    expect(box.get_by_role("link", name="Read the explanation")).to_have_attribute(
        "href", "#" + result["s"]
    )
    expect(box.get_by_role("link", name="See it in the table")).to_have_attribute(
        "href", f"#loop-{key}"
    )


def assert_no_claim(page, asks="Answer the four questions above"):
    box = page.locator("#result")
    expect(box).to_contain_text(asks)
    expect(box.locator("h3, dl, pre")).to_have_count(0)
    assert box.get_attribute("class") in ("", None)


def test_every_combination_through_the_form(page: Page, built_page, expected):
    """All reachable combinations: the result is the captured one, never 'already the fix' to a
    reader who says it raises, never an unconditional 'runs' where a captured variant raises,
    and the in-place error text wherever a retain_graph combination has an optimizer step."""
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(built_page.as_uri())
    assert sorted(expected["results"]) == sorted(COMBOS)
    for key in COMBOS:
        answer(page, key, lambda key=key: assert_greyed_say_why(page, key))
        assert page.evaluate("location.hash") == "#" + fragment(key)
        assert_result(page, expected, key)
        shown = page.locator("#result").inner_text()
        assert "already the fix" not in shown  # every answer to question 1 says it raises
        assert not re.search(r"\b\w+(-\w+){3}\b", shown), key  # no internal keys
        raising = [k for k in variants(key) if k.partition("~")[2] not in checker.DEAD_ENDS]
        raising = [k for k in raising if LOOPS[k].raised is not None]
        headline = page.locator("#result h3").inner_text()
        if raising:
            assert headline.startswith("Raises") or not headline.startswith("Runs"), key
            for k in raising:  # each raising variant's message is quoted, its first clause
                clause = checker.first_clause(LOOPS[k].raised.message)
                expect(page.locator("#result", has_text=clause)).to_be_visible()
        if any(k.endswith("~step") for k in variants(key)):
            assert answers(key)["retain"] == "retain"
            assert "in-place error" in headline and INPLACE in shown, key
        assert_words_for_a_reader(page, key)
    assert requests == [built_page.as_uri()]


SENTENCES = """() => {
  const box = document.getElementById("result");
  const texts = [...box.querySelectorAll("h3, p.note, .variant > h4, .variant > p:not(.fix)")]
    .map((e) => e.textContent);
  for (const li of box.querySelectorAll(".tried li")) {
    const copy = li.cloneNode(true);
    copy.querySelectorAll("strong, pre").forEach((e) => e.remove());
    texts.push(copy.textContent);
  }
  return texts;
}"""
GREYED = """() => [...document.querySelectorAll("#checker input:disabled")].map((input) => {
  const note = document.getElementById(input.getAttribute("aria-describedby"));
  return [input.name + "=" + input.value, input.parentNode.title,
          note && !note.hidden ? note.textContent : ""];
})"""


def without_examples(text):
    """The text with each '(e.g. ...)' taken out, nested parentheses included."""
    while "(e.g. " in text:
        start = text.index("(e.g. ")
        depth, end = 0, start
        for end in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
        text = text[:start] + text[end + 1 :]
    return text


def assert_words_for_a_reader(page, key):
    """No sentence names a call of the loop without saying whose it is (the loop's line only as
    an example after the role), no headline runs over 30 words, and every greyed option says
    why on hover and to a screen reader."""
    headline = page.locator("#result h3").inner_text()
    assert len(headline.split()) <= 30, (key, headline)
    for text in page.evaluate(SENTENCES):
        bare = without_examples(text)
        assert not re.search(r"[\w)]\.backward\(", bare), (key, text)
        # a call is named by whose it is: "your backward() after autograd.grad()", "the
        # backward() in your closure", never the loop's own line outside an example
        for at in re.finditer(r"\bat ([^():]*?)\b(backward|autograd\.grad)\(\)", bare):
            assert at.group(1).startswith(("your ", "the ", "G's ", "D's ")), (key, text)
        assert not re.search(r"\d+ saved tensors?|\d+ training loops", text), (key, text)
    assert_greyed_say_why(page, key)


def assert_greyed_say_why(page, key):
    """Every greyed option says why, on hover and to a screen reader, at any point of the walk."""
    for option, title, note in page.evaluate(GREYED):
        assert title.startswith("Not offered with your answer to question "), (key, option)
        assert note.startswith("Greyed: not offered with your answer to question "), (key, option)


def test_a_reader_whose_code_raises_is_told_what_to_check_next(page: Page, built_page, expected):
    key = "first-grad-nothing-create"
    page.goto(built_page.as_uri() + "#" + fragment(key))
    note = page.locator("#result p.note")
    expect(note).to_contain_text(
        "A gradient penalty with create_graph=True, written the usual way, runs all 4 steps."
    )
    expect(note).to_contain_text("is the fake batch detached in the critic step?")
    raising = page.locator("#result div.variant.raises")
    expect(raising.locator("h4")).to_contain_text("WGAN-GP")
    expect(raising.locator("pre.diff .ins")).to_contain_text(["fake.detach()", "fake.detach()"])
    expect(page.get_by_role("link", name="Run the diagnoser on your script")).to_have_attribute(
        "href", "#diagnoser"
    )


def test_the_options_that_cannot_occur_are_disabled(page: Page, built_page):
    page.goto(built_page.as_uri())
    page.locator("input[name='when'][value='later']").check()
    for value in ("shared", "gan", "gfirst", "dist", "ac"):
        expect(page.locator(f"input[name='calls'][value='{value}']")).to_be_disabled()
    expect(page.locator("input[name='calls'][value='twice']")).to_be_enabled()  # a re-run cell
    # unrolled meta-learning: autograd.grad with create_graph=True, its weights carried over
    page.locator("input[name='calls'][value='grad']").check()
    expect(page.locator("input[name='reach'][value='rnn']")).to_be_checked()  # the only one
    expect(page.locator("input[name='retain'][value='create']")).to_be_checked()
    expect(page.locator("input[name='retain'][value='create']")).to_be_enabled()
    page.locator("input[name='calls'][value='one']").check()
    expect(page.locator("input[name='reach'][value='nothing']")).to_be_disabled()
    expect(page.locator("input[name='reach'][value='lstm-both']")).to_be_enabled()
    page.locator("input[name='calls'][value='twice']").check()
    expect(page.locator("input[name='reach'][value='nothing']")).to_be_checked()  # the only one
    page.locator("input[name='when'][value='first']").check()
    page.locator("input[name='calls'][value='gan']").check()
    expect(page.locator("input[name='retain'][value='create']")).to_be_enabled()  # WGAN-GP
    page.locator("input[name='calls'][value='twice']").check()
    expect(page.locator("input[name='retain'][value='create']")).to_be_disabled()
    page.locator("input[name='calls'][value='one']").check()  # one backward(), in a closure
    expect(page.locator("input[name='retain'][value='retain']")).to_be_disabled()
    expect(page.locator("#result h3")).to_contain_text("in your closure, called again by L-BFGS")


def test_before_any_answer_the_checker_claims_nothing(page: Page, built_page):
    page.goto(built_page.as_uri())
    assert_no_claim(page)
    page.locator("input[name='when'][value='later']").check()
    assert_no_claim(page)  # three answers still missing


@pytest.mark.parametrize(
    "bad, asks",
    [
        ("when=never&calls=one&reach=rnn&retain=none", "Answer question 1 too"),
        ("when=first&calls=shared", "Answer question 4 too"),
        ("x=%ZZ&&=", "Answer the four questions above"),
        ("when=", "Answer the four questions above"),
    ],
)
def test_malformed_fragment_claims_nothing(page: Page, built_page, bad, asks):
    page.goto(built_page.as_uri() + "#" + bad)
    assert_no_claim(page, asks)


def test_a_greyed_option_says_why_on_hover_and_to_a_screen_reader(page: Page, built_page):
    page.goto(built_page.as_uri())
    page.locator("input[name='when'][value='first']").check()
    page.locator("input[name='calls'][value='twice']").check()
    create = page.locator("input[name='retain'][value='create']")
    expect(create).to_be_disabled()
    why = (
        "Not offered with your answer to question 2, \u201cbackward() twice on one loss"
        " (a re-run notebook cell too)\u201d."
    )
    expect(create).to_have_accessible_description("Greyed: n" + why[1:])
    expect(page.locator("label", has=create)).to_have_attribute("title", why)
    expect(page.locator("#greyed-retain")).to_be_visible()
    expect(page.locator("#hint-retain")).to_have_text(checker.QUESTIONS[3][2])  # kept as it is
    page.locator("input[name='calls'][value='gan']").check()
    expect(create).to_be_enabled()
    expect(create).to_have_accessible_description("")
    expect(page.locator("label", has=create)).not_to_have_attribute("title", re.compile("."))
    expect(page.locator("#greyed-retain")).to_be_hidden()


def test_an_unanswered_question_is_marked_when_a_later_one_is_answered(page: Page, built_page):
    page.goto(built_page.as_uri())
    page.locator("input[name='when'][value='first']").check()
    expect(page.locator("#unanswered-calls")).to_be_hidden()
    page.locator("input[name='retain'][value='none']").check()
    expect(page.locator("#unanswered-calls")).to_be_visible()
    expect(page.locator("#unanswered-calls")).to_have_text("Not answered yet.")
    expect(page.locator("#unanswered-reach")).to_be_visible()
    assert_no_claim(page, "Answer questions 2 and 3 too (marked above).")
    page.locator("input[name='calls'][value='shared']").check()
    expect(page.locator("#unanswered-calls")).to_be_hidden()
    expect(page.locator("#unanswered-reach")).to_be_hidden()  # filled in: its only option
    expect(page.locator("#result h3")).to_have_text(HEADLINES["first-shared-nothing-none"])


def test_the_last_question_left_is_marked(page: Page, built_page):
    page.goto(built_page.as_uri())
    page.locator("input[name='when'][value='first']").check()
    expect(page.locator("#unanswered-retain")).to_be_hidden()
    page.locator("input[name='calls'][value='shared']").check()  # question 3 fills itself in
    expect(page.locator("#unanswered-retain")).to_be_visible()
    assert_no_claim(page, "Answer question 4 too (marked above).")
    page.locator("input[name='retain'][value='none']").check()
    expect(page.locator("#unanswered-retain")).to_be_hidden()


def test_an_answer_the_form_clears_or_fills_is_said_in_the_live_region(page: Page, built_page):
    page.goto(built_page.as_uri() + "#" + fragment("first-gan-nothing-create"))
    expect(page.locator("#result h3")).to_have_count(1)
    page.locator("input[name='calls'][value='twice']").check()
    expect(page.locator("input[name='retain'][value='create']")).not_to_be_checked()
    status = page.get_by_role("status")
    twice = "your answer to question 2, \u201cbackward() twice on one loss (a re-run notebook cell too)\u201d"
    expect(status.locator("p.said")).to_have_text(
        "Cleared your answer to question 4, \u201ccreate_graph=True on autograd.grad()\u201d:"
        f" it is not offered with {twice}."
    )
    page.locator("input[name='when'][value='saved']").check()
    saved = "your answer to question 1, \u201cReading a saved tensor (grad_fn._saved_*, a graph viewer)\u201d"
    filled = ": the only option offered with your earlier answers."
    one = "Filled in your answer to question 2, \u201cOne backward()\u201d" + filled
    expect(status.locator("p.said")).to_have_text(
        [f"Cleared {twice}: it is not offered with {saved}.", one]
    )  # question 3's answer, "Nothing", was already given
    page.goto(built_page.as_uri())
    page.locator("input[name='when'][value='saved']").check()
    nothing = "Filled in your answer to question 3, \u201cNothing: fresh data each step\u201d"
    expect(status.locator("p.said")).to_have_text([one, nothing + filled])


def test_answers_replace_the_url_so_back_leaves_in_one_press(page: Page, built_page):
    page.goto(built_page.as_uri())
    length = page.evaluate("history.length")
    answer(page, "first-shared-nothing-none")
    assert page.evaluate("location.hash") == "#" + fragment("first-shared-nothing-none")
    assert page.evaluate("history.length") == length
    page.reload()
    expect(page.locator("#result h3")).to_have_text(HEADLINES["first-shared-nothing-none"])
    page.go_back()
    assert page.url == "about:blank"


def test_none_of_these_fits_points_to_anomaly_mode_and_the_diagnoser(page: Page, built_page):
    page.goto(built_page.as_uri())
    page.locator("input[name='when'][value='first']").check()
    page.locator("input[name='calls'][value='other']").check()
    box = page.locator("#result")
    expect(box.locator("h3")).to_have_text("None of these fits")
    expect(box.get_by_role("link", name="anomaly mode")).to_have_attribute("href", "#anomaly")
    expect(box.get_by_role("link", name="diagnoser")).to_have_attribute("href", "#diagnoser")
    rule = box.locator("p").first
    expect(rule).to_contain_text("Detach it if it is a past value")
    expect(rule).to_contain_text("compute it again in each step if it comes from weights you train")
    download = box.get_by_role("link", name="download diagnose.py")
    expect(download).to_have_attribute("href", "diagnose.py")
    expect(download).to_have_attribute("download", "")
    expect(box.locator("code", has_text="python diagnose.py train.py")).to_have_count(1)


def test_deep_link_sets_the_form_and_scrolls_to_the_result(page: Page, built_page, expected):
    key = "later-one-lstm-both-none"
    page.set_viewport_size({"width": 390, "height": 700})
    page.goto(built_page.as_uri() + "#" + fragment(key))
    for name, value in answers(key).items():
        expect(page.locator(f"input[name='{name}'][value='{value}']")).to_be_checked()
    assert_result(page, expected, key)
    top = page.evaluate("document.getElementById('result').getBoundingClientRect().top")
    assert -1 < top < 700  # scrolled to it (sub-pixel rounding aside)


def test_the_result_follows_question_four_and_the_presets_follow_it(page: Page, built_page):
    page.goto(built_page.as_uri())
    order = page.evaluate(
        "[...document.querySelectorAll('#checker, #result, ul.presets')].map(e => e.id || e.className)"
    )
    assert order == ["checker", "result", "presets"]


EXPERT = {
    "A notebook cell run again": ("", "    feat = torch.tanh(encoder(x))"),
    "nn.LSTM over sequences": ("", "    hidden = tuple(t.detach() for t in hidden)"),
    "WGAN-GP": ("", "D(fake.detach()).mean()"),
    "Saved tensors read after backward": ("", "._saved_result"),
    "retain_graph=True, then an in-place error": ("", "h = h.detach()"),
    "REINFORCE with a moving-average baseline": ("baseline", "0.1 * reward.mean().item()"),
    "Unrolled meta-learning": ("", "    w = w.detach().requires_grad_()"),
    "L-BFGS with a closure": ("", "# the forward pass, in the closure"),
}


@pytest.mark.parametrize("name, key, section", checker.PRESETS, ids=[p[0] for p in checker.PRESETS])
def test_every_preset_shows_its_case_and_the_experts_fix(
    page: Page, built_page, expected, name, key, section
):
    page.goto(built_page.as_uri())
    page.get_by_role("link", name=name, exact=True).click()
    assert_result(page, expected, key)
    assert checker.unpacked(expected["results"][key])["s"] == section
    title, added = EXPERT[name]
    block = page.locator("#result div.variant")
    if title:
        block = block.filter(has=page.locator("h4", has_text=title))
    lines = block.locator("pre.diff .ins").all_text_contents()
    assert any(added in line for line in lines), lines
    assert not any("retain_graph=True" in line for line in lines)


def test_presets_back_and_forward(page: Page, built_page, expected):
    page.goto(built_page.as_uri())
    page.get_by_role("link", name="WGAN-GP", exact=True).click()
    assert_result(page, expected, "first-gan-nothing-create")
    page.get_by_role("link", name="nn.LSTM over sequences", exact=True).click()
    assert_result(page, expected, "later-one-lstm-both-none")
    page.go_back()
    assert_result(page, expected, "first-gan-nothing-create")
    expect(page.locator("input[name='retain'][value='create']")).to_be_checked()
    page.go_forward()
    assert_result(page, expected, "later-one-lstm-both-none")


def test_keyboard_only(page: Page, built_page, expected):
    page.goto(built_page.as_uri())
    first = page.locator("input[name='when'][value='first']")
    first.focus()
    page.keyboard.press("Space")
    expect(first).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.locator("input[name='calls'][value='one']")).to_be_focused()  # L-BFGS's closure
    page.keyboard.press("ArrowDown")
    expect(page.locator("input[name='calls'][value='twice']")).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.locator("input[name='reach'][value='nothing']")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.locator("input[name='retain'][value='none']")).to_be_focused()
    page.keyboard.press("Space")
    assert_result(page, expected, "first-twice-nothing-none")
    expect(page.locator("#result")).to_have_attribute("role", "status")
    focused = page.evaluate(
        "[document.activeElement.matches(':focus-visible'), getComputedStyle(document.activeElement).outlineStyle]"
    )
    assert focused == [True, "solid"]


def test_diffs_keep_their_indentation_on_a_phone(page: Page, built_page):
    """At 390 px a wrapped code line continues under its own code, not at the left edge."""
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(built_page.as_uri() + "#" + fragment("first-gan-nothing-create"))
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    lines = page.locator("#result pre.diff span.ins")
    expect(lines.first).to_be_visible()
    checked = 0
    for i in range(lines.count()):
        found = lines.nth(i).evaluate(
            """(line) => {
              const range = document.createRange();
              range.selectNodeContents(line);
              const rows = {};  // each row's leftmost box: where that row's text starts
              for (const box of range.getClientRects()) {
                const top = Math.round(box.top);
                rows[top] = Math.min(rows[top] ?? Infinity, Math.round(box.left));
              }
              const lefts = Object.keys(rows).sort((a, b) => a - b).map((top) => rows[top]);
              return {lefts, hang: parseFloat(getComputedStyle(line).paddingLeft)};
            }"""
        )
        first, *later = found["lefts"]
        if later:  # the line wrapped: its later rows start where its code starts
            checked += 1
            assert found["hang"] > 0, found
            assert all(abs(left - first - found["hang"]) <= 2 for left in later), found
    assert checked, "no diff line wrapped at 390 px; the test would show nothing"


def test_each_table_row_opens_its_combination(page: Page, built_page, expected):
    """Without JavaScript a row is text; with it, its answers link to the checker's result."""
    page.goto(built_page.as_uri())
    page.locator("#loops > summary").click()
    links = page.locator("#loops tbody tr td:first-child a")
    expect(links).to_have_count(len(COMBOS))
    key = "later-one-lstm-retain"
    row = page.locator(f"#loop-{key}")
    expect(row.locator("td").nth(1)).to_have_text(HEADLINES[key])
    row.locator("a").click()
    assert page.evaluate("location.hash") == "#" + fragment(key)
    assert_result(page, expected, key)


def test_rows_are_plain_text_without_javascript(browser, built_page):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(built_page.as_uri())
    expect(page.locator("#loops tbody a")).to_have_count(0)
    expect(page.locator("#loops tbody tr")).to_have_count(len(COMBOS))
    context.close()
