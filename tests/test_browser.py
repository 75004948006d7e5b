"""The page in a real Chromium: the checker, safety, keyboard use, and accessibility."""

import json
import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from backtwice import checker
from backtwice import snapshot as snap
from backtwice.checker import fragment

from .conftest import SNAPSHOTS

pytestmark = pytest.mark.browser
NAMES = ("calls", "retain", "carried", "summed")
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]


@pytest.fixture(scope="module")
def expected():
    """The checker's data derived in Python from the committed snapshot."""
    data, _ = checker.build(snap.load_dir(SNAPSHOTS)[-1][1].loops)
    return data


def text(data, index):
    return None if index is None else data["strings"][index]


def answers(key):
    yes = {"y": "yes", "n": "no"}
    return {"calls": key[0], "retain": yes[key[1]], "carried": yes[key[2]], "summed": yes[key[3]]}


def watch(page: Page):
    """Record every request and console message of the page."""
    seen = {"requests": [], "console": [], "dialogs": []}
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("console", lambda m: seen["console"].append(m.text))
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    return seen


def assert_result(page, data, key):
    result = data["results"][key]
    box = page.locator("#result")
    expect(box.locator("h3")).to_have_text(text(data, result["headline"]))
    expect(box).to_have_class(result["kind"])
    for term, field in (
        ("Where it raised", "where"),
        ("The exact text", "message"),
        ("Anomaly mode points at", "anomaly"),
        ("The fix", "fix"),
    ):
        dd = box.locator(f"dt:text-is('{term}') + dd")
        if result[field] is None:
            expect(dd).to_have_count(0)
        else:
            expect(dd).to_have_text(text(data, result[field]))
    diff = "".join(f"{kind} {text(data, line)}\n" for kind, line in result["diff"])
    assert box.locator("pre.diff").text_content() == diff
    expect(box.get_by_text(text(data, result["fixed"]), exact=True)).to_be_visible()
    expect(box.get_by_role("link", name="See this loop in the table")).to_have_attribute(
        "href", f"#loop-{key}"
    )


def test_every_combination_through_the_form(page: Page, built_page, expected):
    seen = watch(page)
    page.goto(built_page.as_uri())
    for key in sorted(expected["results"], reverse=True):  # the default, 1nnn, comes last
        for name, value in answers(key).items():
            page.locator(f"input[name='{name}'][value='{value}']").check()
        assert_result(page, expected, key)
        assert page.evaluate("location.hash") == "#" + fragment(key)
    assert seen["requests"] == [built_page.as_uri()]
    assert not [m for m in seen["console"] if "Content Security Policy" in m or "Refused" in m]


def test_deep_link_sets_form_and_result(page: Page, built_page, expected):
    page.goto(built_page.as_uri() + "#" + fragment("2yny"))
    for name, value in answers("2yny").items():
        expect(page.locator(f"input[name='{name}'][value='{value}']")).to_be_checked()
    assert_result(page, expected, "2yny")


@pytest.mark.parametrize(
    "bad", ["calls=3&retain=no&carried=no&summed=no", "calls=2&retain=maybe", "x=%ZZ&&=", "calls=1"]
)
def test_malformed_fragment_gives_the_default(page: Page, built_page, expected, bad):
    page.goto(built_page.as_uri() + "#" + bad)
    for name, value in answers(expected["default"]).items():
        expect(page.locator(f"input[name='{name}'][value='{value}']")).to_be_checked()
    assert_result(page, expected, expected["default"])


def test_presets_back_and_forward(page: Page, built_page, expected):
    page.goto(built_page.as_uri())
    page.get_by_role("link", name="RNN state not detached", exact=True).click()
    assert_result(page, expected, "1nyn")
    page.get_by_role("link", name="Losses summed", exact=True).click()
    assert_result(page, expected, "1nny")
    page.go_back()
    assert_result(page, expected, "1nyn")
    expect(page.locator("input[name='carried'][value='yes']")).to_be_checked()
    page.go_forward()
    assert_result(page, expected, "1nny")


def test_keyboard_only(page: Page, built_page, expected):
    page.goto(built_page.as_uri())
    first = page.locator("input[name='calls'][value='1']")
    first.focus()
    page.keyboard.press("ArrowRight")  # radio groups move with arrow keys
    expect(page.locator("input[name='calls'][value='2']")).to_be_checked()
    page.keyboard.press("Tab")
    expect(page.locator("input[name='retain'][value='no']")).to_be_focused()
    page.keyboard.press("ArrowRight")
    assert_result(page, expected, "2ynn")
    # The result is announced: it lives in a status region.
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
    expect(page.locator("#loops + p + .table-wrap tbody tr")).to_have_count(16)
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
    page.goto(built_page.as_uri() + "#" + fragment("2yyn"))
    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG}})
    assert results.violations_count == 0, results.generate_report()


def test_markup_in_captured_text_stays_text(page: Page, doctor):
    evil = "</script><img src=x onerror=alert(1)>"

    def inject(data):
        for run in list(data["scenarios"].values()) + list(data["loops"].values()):
            if run["raised"] and run is not data["scenarios"]["inplace_after_retain"]:
                run["raised"]["message"] = evil
        data["scenarios"]["c1_retain_then_backward"]["outputs"][0]["text"] = evil

    path = doctor(inject)
    seen = watch(page)
    page.goto(path.as_uri() + "#" + fragment("2nnn"))
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
            if run["raised"] and run is not data["scenarios"]["inplace_after_retain"]:
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
        data["loops"]["2yyn"]["raised_step"] = 3
        data["loops"]["1ynn"]["steps"] = [
            {"step": s, "depth": 4, "grad": 0.8, "saved": 7} for s in (1, 2, 3, 4)
        ]

    path = doctor(change)
    page.goto(path.as_uri() + "#" + fragment("1ynn"))
    expect(page.locator("blockquote.message")).to_have_text("Doctored message.")
    expect(page.locator("#provenance")).to_contain_text(
        "Captured on 2031-02-03 with torch 9.9.9, Python 3.99.1"
    )
    expect(page.locator("#cause-1")).to_contain_text("goes from [5, 6, 7] to [10, 12, 14]")
    expect(page.locator("#cause-2")).to_contain_text("grows by one node per step (10, 11, 12, 13)")
    expect(page.locator("#chart-depth-desc")).to_contain_text("10, 11, 12, 13")
    expect(page.locator("#retain")).to_contain_text("all 3 (3 MiB) stay alive")
    expect(page.locator("#chart-memory-desc")).to_contain_text("retain_graph=True: 3 MiB")
    expect(page.locator("#anomaly")).to_contain_text("it names doctored = line()")
    expect(page.locator("#result h3")).to_have_text(
        re.compile("keeps 7 saved tensors alive after every step")
    )


def test_schema_ld_and_checker_data_parse_in_the_browser(page: Page, built_page):
    page.goto(built_page.as_uri())
    raw = page.locator("script[type='application/ld+json']").text_content()
    assert json.loads(raw)["@type"] == "FAQPage"
