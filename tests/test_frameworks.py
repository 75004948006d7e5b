"""The "In frameworks" part: each framework's loop captured what the page says it does, and
frameworks.html, the page the build writes beside index.html with those loops in full."""

import base64
import hashlib
import html
import re
import subprocess
import sys

import pytest

from backtwice import claims, manifest, render
from backtwice import facts as f
from backtwice import snapshot as snap
from backtwice.errors import PageError
from backtwice.publish import check_page, finished_pages

from .conftest import REPRO, ROOT, SNAPSHOTS

pytestmark = pytest.mark.unit
LOOPS = ("fw_compile", "fw_ddp", "fw_checkpoint", "fw_checkpoint_fixed", "fw_amp")
BASE_LINK = 'Changes from <a href="#s-{0}">repro/{0}.py</a>:'


@pytest.fixture(scope="module")
def newest():
    return snap.load_dir(SNAPSHOTS)[-1][1]


@pytest.fixture(scope="module")
def pages():
    """Both pages as the build writes them: {file name: HTML}."""
    return finished_pages(snap.load_dir(SNAPSHOTS), REPRO)


def test_compile_raises_the_donated_buffers_error_at_the_retained_call(newest):
    raised = newest.scenarios["fw_compile"].raised
    assert raised.type == "RuntimeError"
    assert "compiled with non-empty donated buffers" in raised.message
    assert raised.code == "loss1.backward(retain_graph=True)"
    # Step 1 (one backward, no retain_graph) ran: the error came on step 2.
    assert f.steps_printed(newest, "fw_compile") == [1, 2]


def test_ddp_two_backward_calls_leave_the_ranks_apart_and_the_sum_does_not(newest):
    assert newest.scenarios["fw_ddp"].raised is None
    rows = {row[0]: row for row in f.printed(newest, "fw_ddp", "step")}
    assert sorted(rows) == [1, 2]
    first, summed = rows[1], rows[2]
    assert not f.close(f.tensor(first[2]), f.tensor(first[4]))
    assert f.close(f.tensor(summed[2]), f.tensor(summed[4]))


def test_reentrant_checkpoint_refuses_autograd_grad_and_non_reentrant_runs(newest):
    raised = newest.scenarios["fw_checkpoint"].raised
    main = newest.scenarios[claims.MAIN].raised.message
    assert raised.message != main
    assert "use_reentrant=True" in raised.message and ".grad()" in raised.message
    assert "autograd.grad" in raised.code
    assert newest.scenarios["fw_checkpoint_fixed"].raised is None
    assert len(f.per_step(newest, "fw_checkpoint_fixed", "penalty")) == 3


def test_amp_scaled_backward_twice_raises_this_error(newest):
    raised = newest.scenarios["fw_amp"].raised
    assert raised.message == newest.scenarios[claims.MAIN].raised.message
    assert raised.code == "scaler.scale(loss).backward()"


def test_each_table_row_links_its_loop_on_frameworks_html(pages):
    page, loops = pages[render.PAGE], pages[render.LOOPS]
    part = re.search(r'<section id="frameworks".*?</section>', page, re.S).group(0)
    table = re.search(r"<table>.*?</table>", part, re.S).group(0)
    rows = re.findall(r"<tr><th>(.*?)(?=<tr>|</table>)", table.split("<tbody>")[1], re.S)
    assert len(rows) == 4  # compile, DDP, checkpoint (both modes), AMP
    assert all('href="frameworks.html#s-fw_' in row for row in rows)
    linked = re.findall(r'href="frameworks\.html#([^"]+)"', page)
    assert sorted(linked) == sorted(f"s-{ident}" for ident in LOOPS)
    for target in linked:
        assert loops.count(f'id="{target}"') == 1, target
    # Each loop is shown once, there and not on the page.
    assert [ident for ident in LOOPS if f'id="s-{ident}"' in page] == []
    declared = [s.id for s in manifest.load(REPRO).scenarios if s.id.startswith(render.FRAMEWORKS)]
    assert declared == list(LOOPS)


def test_frameworks_html_is_a_page_of_its_own_with_a_strict_csp_and_no_script(pages):
    page, loops = pages[render.PAGE], pages[render.LOOPS]
    assert loops.startswith('<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">')
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', loops)
    (style,) = re.findall(r"<style>(.*?)</style>", loops, re.S)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert html.unescape(csp.group(1)) == (
        f"default-src 'none'; style-src 'sha256-{digest}'; "
        "img-src 'none'; base-uri 'none'; form-action 'none'"
    )
    assert re.findall(r"<style>(.*?)</style>", page, re.S) == [style]  # the same stylesheet
    assert "<script" not in loops and "<link" not in loops and "url(" not in loops
    assert not re.search(r"\b(src|srcset|poster|data)=", " ".join(re.findall(r"<[^>]*>", loops)))
    assert re.findall(r'href="(?!#)([^"]+)"', loops) == ["index.html#frameworks"] * 2
    assert '<meta name="referrer" content="no-referrer">' in loops
    for landmark in ("<header>", '<main id="main">', "<h1>"):
        assert loops.count(landmark) == 1


def test_frameworks_html_shows_each_loop_in_full_as_it_ran(pages, newest):
    loops = pages[render.LOOPS]
    for ident in LOOPS:
        figure = re.search(rf'<figure class="scenario" id="s-{ident}">(.*?)</figure>', loops, re.S)
        base = render.BASES.get(ident)
        if base is None:
            code = re.search(r'<pre class="hl" tabindex="0"><code>(.*?)</code>', figure[1], re.S)
            source = (REPRO / f"{ident}.py").read_text()
            assert html.unescape(re.sub(r"<[^>]+>", "", code[1])) == source
        else:  # the lines that differ from a loop shown in full above it, on this page
            assert base.startswith(render.FRAMEWORKS) and BASE_LINK.format(base) in figure[1]
            assert loops.index(f'id="s-{base}"') < loops.index(f'id="s-{ident}"')
        raised = newest.scenarios[ident].raised
        if raised is not None:  # the message in full, this page's own error too
            assert html.unescape(f"{raised.type}: {raised.message}") in html.unescape(figure[1])
    assert f"torch {newest.environment.torch}" in loops


def test_a_loop_missing_a_printed_line_on_frameworks_html_stops_the_build(pages):
    snapshots = snap.load_dir(SNAPSHOTS)
    line = snapshots[-1][1].scenarios["fw_ddp"].outputs[0].text.split("\n")[0]
    cut = {**pages, render.LOOPS: pages[render.LOOPS].replace(html.escape(line, False), "")}
    with pytest.raises(PageError, match="scenario 'fw_ddp' printed"):
        check_page(cut, snapshots, manifest.load(REPRO))


def test_two_builds_write_the_same_bytes(tmp_path):
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        result = subprocess.run(
            [sys.executable, "build.py", "--render-only", "--quiet", "--out", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in outs[0].iterdir())
    assert names == ["diagnose.py", "frameworks.html", "index.html"]
    for name in names:
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name
