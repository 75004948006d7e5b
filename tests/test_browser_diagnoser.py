"""The diagnoser section in Chromium: its download is the file shown, made without a request."""

import pytest
from playwright.sync_api import Page, expect

from backtwice import manifest

pytestmark = pytest.mark.browser


def test_download_gives_the_file_shown(page: Page, built_page, tmp_path):
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(built_page.as_uri())
    link = page.locator("#diagnose-download a")
    expect(link).to_have_text("Download diagnose.py")
    with page.expect_download() as info:
        link.click()
    download = info.value
    assert download.suggested_filename == "diagnose.py"
    target = tmp_path / "diagnose.py"
    download.save_as(target)
    assert target.read_text(encoding="utf-8") == manifest.DIAGNOSER_FILE.read_text(encoding="utf-8")
    assert [url for url in requests if not url.startswith("blob:")] == [built_page.as_uri()]


def test_source_is_readable_without_javascript(browser, built_page):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(built_page.as_uri())
    expect(page.locator("#diagnose-download a")).to_have_count(0)
    page.locator("#diagnoser details summary").click()
    expect(page.locator("#diagnose-source")).to_contain_text("def format_report(report):")
    context.close()
