"""The diagnoser in Chromium: served beside the page, downloaded from its link byte for byte."""

import contextlib
import functools
import http.server
import threading

import pytest
from playwright.sync_api import Page, expect

from backtwice import cli, manifest

from .conftest import SNAPSHOTS

pytestmark = pytest.mark.browser


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A --render-only build of the committed snapshots, served on 127.0.0.1: its page's URL."""
    out = tmp_path_factory.mktemp("served")
    assert (
        cli.main(["--render-only", "--quiet", "--snapshots", str(SNAPSHOTS), "--out", str(out)])
        == 0
    )
    handler = functools.partial(Quiet, directory=str(out))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
        finally:
            server.shutdown()
            thread.join()


def test_the_download_is_backtwice_diagnose_py_byte_for_byte(page: Page, served, tmp_path):
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(served)
    assert requests == [served]  # the page alone: one request
    link = page.locator('#diagnoser p a[href="diagnose.py"]')
    with page.expect_download() as info:
        link.click()
    download = info.value
    assert download.suggested_filename == "diagnose.py"
    target = tmp_path / "diagnose.py"
    download.save_as(target)
    # Compared with what the file holds now, whoever last changed it.
    assert target.read_bytes() == manifest.DIAGNOSER_FILE.read_bytes()


def test_the_fetch_command_names_the_served_file(page: Page, served):
    page.goto(served)
    tool = served.rsplit("/", 1)[0] + "/diagnose.py"
    expect(page.locator("#tool-url")).to_have_text(tool)
    expect(page.locator("#diagnoser pre.command")).to_contain_text(f"curl -O {tool}\n")
    expect(page.locator("#tool-hint")).to_be_hidden()


def test_without_javascript_the_command_holds_a_plain_link(browser, served):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(served)
    expect(page.locator("#tool-url")).to_have_text("diagnose.py")
    expect(page.locator("#tool-url")).to_have_attribute("href", "diagnose.py")
    expect(page.locator("#tool-hint")).to_be_visible()
    with contextlib.closing(context):
        response = page.request.get(served.rsplit("/", 1)[0] + "/diagnose.py")
        assert response.body() == manifest.DIAGNOSER_FILE.read_bytes()
