"""The page in a real Chromium: the checker, safety, keyboard use, and accessibility."""

import json
import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from backtwice import checker
from backtwice.checker import fragment
from backtwice.manifest import load_loop_builder

from .conftest import REPRO

pytestmark = pytest.mark.browser
NAMES = checker.NAMES
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
COMBOS = [a.key for a in load_loop_builder(REPRO).combinations()]


def watch(page: Page):
    """Record every request and console message of the page."""
    seen = {"requests": [], "console": [], "dialogs": []}
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("console", lambda m: seen["console"].append(m.text))
    page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
    return seen


def test_readable_without_javascript(browser, built_page, snapshot_data):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(built_page.as_uri())
    expect(page.locator("#result .needs-js")).to_contain_text("The checker needs JavaScript")
    message = snapshot_data["scenarios"]["c1_backward_twice"]["raised"]["message"]
    expect(page.locator("blockquote.message")).to_have_text(message)
    expect(page.locator("#loops + .table-wrap tbody tr")).to_have_count(len(COMBOS))
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


@pytest.mark.parametrize("scheme", ["dark", "light"])
@pytest.mark.parametrize("key", ["later-one-rnn-none", "first-twice-nothing-retain"])
def test_no_axe_violations_with_a_result(page: Page, built_page, scheme, key):
    page.emulate_media(color_scheme=scheme)
    page.goto(built_page.as_uri() + "#" + fragment(key))
    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG}})
    assert results.violations_count == 0, results.generate_report()


def loops_to_doctor(data):
    """The loops whose messages a doctored page may replace: not the WGAN-GP, the raising
    variant the checker needs before it tells a reader whose loop runs what to check next."""
    return [run for key, run in data["loops"].items() if not key.endswith("wgan")]


def test_markup_in_captured_text_stays_text(page: Page, doctor):
    evil = "</script><img src=x onerror=alert(1)>"

    def inject(data):
        for run in list(data["scenarios"].values()) + loops_to_doctor(data):
            if run["raised"] and run is not data["scenarios"]["inplace_after_retain"]:
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
        for run in list(data["scenarios"].values()) + loops_to_doctor(data):
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
        data["scenarios"]["c1_backward_twice"]["diagnosis"]["raised"]["line"] = 5
        data["loops"]["later-one-rnn-none"]["raised_step"] = 3
        for step in data["loops"]["first-shared-nothing-retain"]["steps"]:
            step["saved"] = 7

    path = doctor(change)
    page.goto(path.as_uri() + "#" + fragment("first-shared-nothing-retain"))
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
    expect(page.locator("#result div.variant").first).to_contain_text(
        "it keeps 7 saved tensors alive between steps, where the fix keeps 0"
    )
    page.goto(path.as_uri() + "#" + fragment("later-one-rnn-none"))
    expect(page.locator("#result h3")).to_have_text(
        re.compile(r"^For a cell .* called once per step, raises on step 3 at loss\.backward")
    )


def test_schema_ld_and_checker_data_parse_in_the_browser(page: Page, built_page):
    page.goto(built_page.as_uri())
    raw = page.locator("script[type='application/ld+json']").text_content()
    assert json.loads(raw)["@type"] == "FAQPage"
