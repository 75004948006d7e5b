"""The page in a real Chromium: the checker, safety, keyboard use, and accessibility."""

import json
import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from backtwice import checker
from backtwice import snapshot as snap
from backtwice.checker import fragment
from backtwice.manifest import load_loop_builder

from .conftest import REPRO, SNAPSHOTS

pytestmark = pytest.mark.browser
NAMES = checker.NAMES
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
KEYS = [a.key for a in load_loop_builder(REPRO).all_answers()]
LOOPS = snap.load_dir(SNAPSHOTS)[-1][1].loops
"""The committed snapshot's loops: each result's diff is checked against its sources."""


@pytest.fixture(scope="module")
def expected():
    """The checker's data derived in Python from the committed snapshot."""
    data, _ = checker.build(snap.load_dir(SNAPSHOTS)[-1][1].loops)
    return data


def text(data, index):
    return None if index is None else data["strings"][index]


def answers(key):
    return dict(zip(NAMES, key.split("-"), strict=True))


def watch(page: Page):
    """Record every request and console message of the page."""
    seen = {"requests": [], "console": [], "dialogs": []}
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("console", lambda m: seen["console"].append(m.text))
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    return seen


def answer(page, key):
    for name, value in answers(key).items():
        radio = page.locator(f"input[name='{name}'][value='{value}']")
        if not radio.is_checked():
            radio.check()


def assert_result(page, data, key):
    result = data["results"][key]
    box = page.locator("#result")
    expect(box.locator("h3")).to_have_text(text(data, result["headline"]))
    expect(box).to_have_class(result["kind"])
    for term, field in (
        ("Where it raised", "where"),
        ("The exact text", "message"),
        ("Anomaly mode points at", "anomaly"),
        ("What it did", "outcome"),
        ("Gradients", "grads"),
        ("The fix", "fix"),
        ("Why not detach it", "tempting"),
    ):
        dd = box.locator(f"dt:text-is('{term}') + dd")
        if result[field] is None:
            expect(dd).to_have_count(0)
        else:
            expect(dd).to_have_text(text(data, result[field]))
    run = LOOPS[key]
    diff = "".join(
        f"{kind} {line}\n" for kind, line in checker.diff_lines(run.source, run.fix.source)
    )
    assert box.locator("pre.diff").text_content() == diff
    expect(box.locator("p.fixed")).to_have_text(text(data, result["fixed"]))
    expect(box.get_by_role("link", name="Read the explanation")).to_have_attribute(
        "href", "#" + result["section"]
    )
    expect(box.get_by_role("link", name="See this loop in the table")).to_have_attribute(
        "href", f"#loop-{key}"
    )


def diff_of(page, sign):
    """The result's diff lines that start with sign ('+' or '-'), without the sign."""
    lines = page.locator("#result pre.diff span").all_text_contents()
    return [line[2:].rstrip("\n") for line in lines if line.startswith(sign + " ")]


def assert_no_claim(page):
    box = page.locator("#result")
    expect(box).to_contain_text("Answer the four questions above")
    expect(box.locator("h3, dl, pre")).to_have_count(0)
    assert box.get_attribute("class") in ("", None)


def test_before_any_answer_the_checker_claims_nothing(page: Page, built_page):
    page.goto(built_page.as_uri())
    assert_no_claim(page)
    expect(page.locator("#checker input:checked")).to_have_count(0)
    page.locator("input[name='when'][value='later']").check()
    assert_no_claim(page)  # three answers still missing


def test_every_combination_through_the_form(page: Page, built_page, expected):
    seen = watch(page)
    page.goto(built_page.as_uri())
    assert sorted(expected["results"]) == sorted(KEYS)
    for key in KEYS:
        answer(page, key)
        assert_result(page, expected, key)
        assert page.evaluate("location.hash") == "#" + fragment(key)
    assert seen["requests"] == [built_page.as_uri()]
    assert not [m for m in seen["console"] if "Content Security Policy" in m or "Refused" in m]


def test_options_that_cannot_occur_are_disabled(page: Page, built_page):
    page.goto(built_page.as_uri())
    page.locator("input[name='when'][value='later']").check()
    for value in ("twice", "shared", "gan", "grad"):
        expect(page.locator(f"input[name='calls'][value='{value}']")).to_be_disabled()
    expect(page.locator("input[name='calls'][value='one']")).to_be_checked()  # the only option
    expect(page.locator("input[name='reach'][value='nothing']")).to_be_disabled()
    expect(page.locator("input[name='reach'][value='other']")).to_be_enabled()
    page.locator("input[name='when'][value='first']").check()
    expect(page.locator("input[name='calls'][value='one']")).not_to_be_checked()
    page.locator("input[name='calls'][value='twice']").check()
    expect(page.locator("input[name='reach'][value='nothing']")).to_be_checked()
    expect(page.locator("input[name='retain'][value='create']")).to_be_disabled()
    page.locator("input[name='calls'][value='grad']").check()
    expect(page.locator("input[name='retain'][value='create']")).to_be_enabled()


def test_none_of_these_fits_points_to_anomaly_mode_and_the_diagnoser(page: Page, built_page):
    page.goto(built_page.as_uri())
    page.locator("input[name='when'][value='first']").check()
    page.locator("input[name='calls'][value='other']").check()
    box = page.locator("#result")
    expect(box.locator("h3")).to_have_text("None of these fits")
    expect(box.get_by_role("link", name="anomaly mode")).to_have_attribute("href", "#anomaly")
    expect(box.get_by_role("link", name="diagnoser")).to_have_attribute("href", "#diagnoser")


def test_deep_link_sets_form_and_result(page: Page, built_page, expected):
    key = "later-one-rnn-retain"
    page.goto(built_page.as_uri() + "#" + fragment(key))
    for name, value in answers(key).items():
        expect(page.locator(f"input[name='{name}'][value='{value}']")).to_be_checked()
    assert_result(page, expected, key)


@pytest.mark.parametrize(
    "bad",
    ["when=never&calls=one&reach=rnn&retain=none", "when=first&calls=one", "x=%ZZ&&=", "when="],
)
def test_malformed_fragment_claims_nothing(page: Page, built_page, bad):
    page.goto(built_page.as_uri() + "#" + bad)
    assert_no_claim(page)


EXPERT = {
    "Same loss twice": (["loss.backward()  # again"], []),
    "RNN state not detached": ([], ["h = h.detach()"]),
    "LSTM with only h detached": (["h = h.detach()"], ["h, c = h.detach(), c.detach()"]),
    "Tensor computed before the loop": (["weight = encoder.weight"], ["    weight = encoder."]),
    "Running total of the loss": (["running_loss.backward()"], ["running_loss += loss.item()"]),
    "Outputs kept in a list": (["replay.append(head(feat))"], ["replay.append(x)"]),
    "Two losses, one forward pass": (
        ["loss_aux.backward()"],
        ["(loss_main + loss_aux).backward()"],
    ),
    "GAN without detach": (["D(fake), fake_label)"], ["D(fake.detach()), fake_label)"]),
    "Gradient penalty": ([], ["create_graph=True)"]),
    "Reading saved tensors after backward": ([], ["._saved_result"]),
    "retain_graph=True, then an in-place error": (["retain_graph=True"], ["h = h.detach()"]),
}


@pytest.mark.parametrize("name, key, section", checker.PRESETS, ids=[p[0] for p in checker.PRESETS])
def test_every_preset_shows_its_case_and_the_experts_fix(
    page: Page, built_page, expected, name, key, section
):
    page.goto(built_page.as_uri())
    link = page.get_by_role("link", name=name, exact=True)
    link.click()
    assert_result(page, expected, key)
    assert expected["results"][key]["section"] == section
    expect(link.locator("xpath=following-sibling::a")).to_have_attribute("href", "#" + section)
    removed, added = diff_of(page, "-"), diff_of(page, "+")
    gone, new = EXPERT[name]
    assert all(any(part in line for line in removed) for part in gone), removed
    assert all(any(line.startswith(part) or part in line for line in added) for part in new), added
    assert not any("d_loss + g_loss" in line or "g_loss + d_loss" in line for line in added)
    assert not any("retain_graph=True" in line for line in added)
    if name == "Tensor computed before the loop":
        assert not any("detach" in line for line in added)
        expect(page.locator("#result dt:text-is('Why not detach it') + dd")).to_contain_text(
            "encoder.weight got no gradient at any step"
        )
    if name.startswith("retain_graph=True"):
        expect(page.locator("#result h3")).to_contain_text("modified by an inplace operation")


def test_presets_back_and_forward(page: Page, built_page, expected):
    page.goto(built_page.as_uri())
    page.get_by_role("link", name="RNN state not detached", exact=True).click()
    assert_result(page, expected, "later-one-rnn-none")
    page.get_by_role("link", name="GAN without detach", exact=True).click()
    assert_result(page, expected, "first-gan-nothing-none")
    page.go_back()
    assert_result(page, expected, "later-one-rnn-none")
    expect(page.locator("input[name='reach'][value='rnn']")).to_be_checked()
    page.go_forward()
    assert_result(page, expected, "first-gan-nothing-none")


def test_keyboard_only(page: Page, built_page, expected):
    page.goto(built_page.as_uri())
    first = page.locator("input[name='when'][value='first']")
    first.focus()
    page.keyboard.press("Space")
    expect(first).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.locator("input[name='calls'][value='twice']")).to_be_focused()  # 'one' is disabled
    page.keyboard.press("Space")
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


def test_readable_without_javascript(browser, built_page, snapshot_data):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(built_page.as_uri())
    expect(page.locator("#result .needs-js")).to_contain_text("The checker needs JavaScript")
    message = snapshot_data["scenarios"]["c1_backward_twice"]["raised"]["message"]
    expect(page.locator("blockquote.message")).to_have_text(message)
    expect(page.locator("#loops .table-wrap tbody tr")).to_have_count(len(KEYS))
    context.close()


def test_comfortable_at_360_px(page: Page, built_page):
    page.set_viewport_size({"width": 360, "height": 800})
    page.goto(built_page.as_uri())
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360


def test_no_axe_violations(page: Page, built_page):
    page.goto(built_page.as_uri())
    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG}})
    assert results.violations_count == 0, results.generate_report()


def test_no_axe_violations_in_dark_mode_with_a_raising_result(page: Page, built_page):
    page.emulate_media(color_scheme="dark")
    page.goto(built_page.as_uri() + "#" + fragment("later-one-rnn-none"))
    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG}})
    assert results.violations_count == 0, results.generate_report()


def test_markup_in_captured_text_stays_text(page: Page, doctor):
    evil = "</script><img src=x onerror=alert(1)>"

    def inject(data):
        for run in list(data["scenarios"].values()) + list(data["loops"].values()):
            if run["raised"] and "inplace operation" not in run["raised"]["message"]:
                run["raised"]["message"] = evil
        data["scenarios"]["c1_retain_then_backward"]["outputs"][0]["text"] = evil

    path = doctor(inject)
    seen = watch(page)
    page.goto(path.as_uri() + "#" + fragment("first-shared-nothing-none"))
    expect(page.locator("blockquote.message")).to_have_text(evil)
    expect(page.locator("#result dt:text-is('The exact text') + dd")).to_have_text(
        f"RuntimeError: {evil}"
    )
    expect(page.locator("img")).to_have_count(0)
    assert seen["dialogs"] == []
    assert seen["requests"] == [path.as_uri()]


def test_doctored_figures_are_shown(page: Page, doctor):
    def change(data):
        env = data["environment"]
        env["torch"], env["python"], env["captured"] = "9.9.9", "3.99.1", "2031-02-03"
        for run in list(data["scenarios"].values()) + list(data["loops"].values()):
            if run["raised"] and "inplace operation" not in run["raised"]["message"]:
                run["raised"]["message"] = "Doctored message."
        grads = data["scenarios"]["c1_retain_then_backward"]["outputs"]
        grads[0]["values"][1]["tensor"] = [5.0, 6.0, 7.0]
        grads[1]["values"][1]["tensor"] = [10.0, 12.0, 14.0]
        for i, output in enumerate(data["scenarios"]["c2_retain_graph"]["outputs"][:4]):
            output["values"][3] = 10 + i
        memory = data["scenarios"]["memory"]["outputs"]
        memory[2]["values"][3] = memory[3]["values"][3] = 3
        memory[2]["values"][5] = memory[3]["values"][5] = 3 * 2**20
        data["scenarios"]["c3_summed_twice"]["anomaly"]["code"] = "doctored = line()"
        data["scenarios"]["c1_backward_twice"]["raised"]["line"] = 5
        data["scenarios"]["c1_backward_twice"]["diagnosis"]["raised"]["line"] = 5
        data["loops"]["later-one-rnn-none"]["raised_step"] = 3
        for step in data["loops"]["first-shared-nothing-retain"]["steps"]:
            step["saved"] = 7

    path = doctor(change)
    page.goto(path.as_uri() + "#" + fragment("first-shared-nothing-retain"))
    expect(page.locator("blockquote.message")).to_have_text("Doctored message.")
    expect(page.locator("#provenance summary")).to_contain_text(
        "captured 2031-02-03 with torch 9.9.9, Python 3.99.1"
    )
    expect(page.locator("#cause-1")).to_contain_text("goes from [5, 6, 7] to [10, 12, 14]")
    expect(page.locator("#cause-2")).to_contain_text("grows by one a step (10, 11, 12, 13)")
    expect(page.locator("#retain")).to_contain_text("all 3 (3 MiB) stay alive")
    expect(page.locator("#anomaly")).to_contain_text("called twice, doctored = line(), not")
    expect(page.locator("#result h3")).to_have_text(
        re.compile("keeps 7 saved tensors alive after each step, where the fixed loop keeps 0")
    )
    page.goto(path.as_uri() + "#" + fragment("later-one-rnn-none"))
    expect(page.locator("#result h3")).to_have_text(
        re.compile("^Raises on step 3, at loss.backward")
    )


def test_schema_ld_and_checker_data_parse_in_the_browser(page: Page, built_page):
    page.goto(built_page.as_uri())
    raw = page.locator("script[type='application/ld+json']").text_content()
    assert json.loads(raw)["@type"] == "FAQPage"


# Issue 16: the page's length, its phone first screen, closed reference tables and deep links.
PHONE = {"width": 390, "height": 844}


def close_every_details(page):
    page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = false; })")


@pytest.mark.parametrize(
    "viewport, limit",
    [({"width": 1280, "height": 800}, 16_000), (PHONE, 24_000)],
    ids=["desktop", "phone"],
)
def test_page_height_with_every_details_closed(page: Page, built_page, viewport, limit):
    page.set_viewport_size(viewport)
    page.goto(built_page.as_uri())
    close_every_details(page)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert 3 * viewport["height"] < height <= limit, height


def test_phone_first_screen_holds_the_explanation_and_a_fix_as_code(page: Page, built_page):
    page.set_viewport_size(PHONE)
    page.goto(built_page.as_uri())
    lede = page.locator("#answer .lede")
    fix = page.locator("#answer pre.fix").first
    lead = page.locator("#answer .fixes li > a").first
    for element in (lede, lead, fix):
        box = element.bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], element
    expect(fix.locator("ins, del").first).to_be_visible()
    assert "loss.backward()" in fix.text_content()
    # The contents list comes after the fixes.
    assert page.locator("nav").bounding_box()["y"] > fix.bounding_box()["y"]


@pytest.mark.parametrize(
    "target", ["row-c2_no_detach", "loop-later-one-rnn-none", "versions", "older", "provenance"]
)
def test_a_deep_link_opens_the_closed_table_around_it(page: Page, built_page, target):
    page.goto(built_page.as_uri() + "#" + target)
    element = page.locator(f"[id='{target}']")
    expect(element).to_be_visible()
    expect(element).to_be_in_viewport()
    close_every_details(page)
    page.goto(built_page.as_uri() + "#answer")
    page.evaluate(f"location.hash = '#{target}'")
    expect(element).to_be_visible()


def test_closed_tables_open_by_click_without_javascript(browser, built_page):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(built_page.as_uri())
    row = page.locator("#row-c1_backward_twice")
    expect(row).to_be_hidden()
    page.locator("#outcomes summary").click()
    expect(row).to_be_visible()
    context.close()


def test_wide_tables_on_a_phone_scroll_and_show_it(page: Page, built_page):
    page.set_viewport_size(PHONE)
    page.goto(built_page.as_uri())
    page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    wraps = page.locator(".table-wrap")
    assert wraps.count() >= 3
    for i in range(wraps.count()):
        style = wraps.nth(i).evaluate(
            "(e) => [getComputedStyle(e).overflowX, getComputedStyle(e).backgroundImage]"
        )
        assert style[0] == "auto" and "gradient" in style[1]
    matrix = page.locator("table.matrix")
    assert matrix.bounding_box()["width"] <= PHONE["width"]


def test_radio_buttons_sit_on_the_first_line_of_their_label(page: Page, built_page):
    page.set_viewport_size(PHONE)
    page.goto(built_page.as_uri())
    labels = page.locator("#checker label")
    two_lines = 0
    for i in range(labels.count()):
        label = labels.nth(i)
        line = float(label.evaluate("(e) => parseFloat(getComputedStyle(e).lineHeight)"))
        box, radio = label.bounding_box(), label.locator("input").bounding_box()
        two_lines += box["height"] > 1.8 * line
        assert radio["y"] - box["y"] < line / 2, label.text_content()
    assert two_lines > 0
