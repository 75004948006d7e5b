"""The page in a real Chromium: the checker, safety, keyboard use, and accessibility."""

import json

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from backtwice import checker
from backtwice import snapshot as snap
from backtwice.checker import fragment
from backtwice.manifest import load_loop_builder
from backtwice.publish import finished_pages

from .conftest import REPRO, SNAPSHOTS

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
    expect(page.locator("#loops .table-wrap tbody tr")).to_have_count(len(COMBOS))
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


def raising_this_error(data):
    """The runs that raise the page's message; those that raise another error (the in-place
    error, the frameworks' errors) keep theirs, which their sentences quote and check."""
    message = data["scenarios"]["c1_backward_twice"]["raised"]["message"]
    runs = list(data["scenarios"].values()) + loops_to_doctor(data)
    return [run for run in runs if run["raised"] and run["raised"]["message"] == message]


def test_markup_in_captured_text_stays_text(page: Page, doctor):
    evil = "</script><img src=x onerror=alert(1)>"

    def inject(data):
        for run in raising_this_error(data):
            run["raised"]["message"] = evil
        data["scenarios"]["c1_retain_then_backward"]["outputs"][0]["text"] = evil

    path = doctor(inject)
    seen = watch(page)
    page.goto(path.as_uri() + "#" + fragment("first-shared-nothing-none"))
    expect(page.locator("blockquote.message")).to_have_text(evil)
    expect(page.locator("#result h3")).to_contain_text(evil)
    expect(page.locator("img")).to_have_count(0)
    assert seen["dialogs"] == []
    assert seen["requests"] == [path.as_uri()]


def test_doctored_figures_are_shown(page: Page, doctor):
    def change(data):
        env = data["environment"]
        env["torch"], env["python"], env["captured"] = "9.9.9", "3.99.1", "2031-02-03"
        for run in raising_this_error(data):
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
    expect(page.locator("#cause-2")).to_contain_text("grows every step (10, 11, 12, 13)")
    expect(page.locator("#retain")).to_contain_text("all 3 (3 MiB) stay alive")
    expect(page.locator("#anomaly")).to_contain_text("called twice, doctored = line(), not")
    expect(page.locator("#result div.variant").first).to_contain_text(
        "it keeps graph memory alive between steps that the fix frees"
    )
    page.goto(path.as_uri() + "#" + fragment("later-one-rnn-none"))
    cell = page.locator("#result div.variant").first
    expect(cell.locator("h4")).to_have_text(
        "For a cell (nn.RNNCell, nn.LSTMCell) called once per step:"
    )
    expect(cell.locator("p").first).to_contain_text(
        "Raises on step 3 at your backward() (e.g. loss.backward())"
    )


def test_checker_data_parses_in_the_browser(page: Page, built_page):
    page.goto(built_page.as_uri())
    raw = page.locator("script#checker-data").text_content()
    assert sorted(json.loads(raw)) == ["names", "results", "strings"]


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


# Each pre's line boxes, counted from where its text lands, and its non-empty lines of text.
LINE_BOXES = """[...document.querySelectorAll('pre')].map((pre) => {
  const range = document.createRange();
  range.selectNodeContents(pre);
  const step = parseFloat(getComputedStyle(pre).lineHeight);
  const top = pre.getBoundingClientRect().top;
  const rows = new Set([...range.getClientRects()].filter((r) => r.width > 0)
    .map((r) => Math.floor((r.top - top + step / 2) / step)));
  const lines = pre.textContent.split("\\n").filter((line) => line.trim()).length;
  return [pre.className || pre.parentElement.className, rows.size, lines,
    pre.scrollWidth > pre.clientWidth];
})"""


def test_no_code_or_report_wraps_on_a_phone(page: Page, built_page):
    page.set_viewport_size(PHONE)
    page.goto(built_page.as_uri())
    page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
    boxes = page.evaluate(LINE_BOXES)
    assert len(boxes) > 40
    wrapped = [(name, rows, lines) for name, rows, lines, _ in boxes if rows != lines]
    assert wrapped == []
    # Some lines are wider than a phone: they scroll inside their box, not the page.
    assert any(scrolls for *_, scrolls in boxes)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


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
    "target",
    ["row-inplace_after_retain", "loop-later-one-rnn-none", "versions", "older", "provenance"],
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
    row = page.locator("#row-inplace_after_retain")  # its text differs on torch 2.0.1 and 2.8.0
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


# frameworks.html, the framework loops' page beside index.html: one load checks its requests,
# axe, and that no code or output wraps on a phone (its lines scroll inside their box).
@pytest.fixture(scope="module")
def site_folder(tmp_path_factory):
    """index.html and frameworks.html, as the build writes them from the committed snapshots."""
    out = tmp_path_factory.mktemp("site")
    for name, text in finished_pages(snap.load_dir(SNAPSHOTS), REPRO).items():
        (out / name).write_text(text, encoding="utf-8")
    return out


def test_frameworks_page_on_a_phone(page: Page, site_folder):
    uri = (site_folder / "frameworks.html").as_uri()
    page.set_viewport_size(PHONE)
    seen = watch(page)
    page.goto(uri)
    assert seen["requests"] == [uri] and seen["console"] == []
    results = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG}})
    assert results.violations_count == 0, results.generate_report()
    boxes = page.evaluate(LINE_BOXES)
    assert len(boxes) >= 8  # each loop's code and output
    assert [(name, rows, lines) for name, rows, lines, _ in boxes if rows != lines] == []
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    # The table's links and the link back are checked in test_frameworks, as files.
