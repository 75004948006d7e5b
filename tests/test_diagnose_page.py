"""The diagnoser on the page's own code: every raising scenario and checker loop, and its section.

The expected lines are derived here from the sources (a known answer per scenario, found by its
code text; the loop builder's own record of the lines it wrote), not from the diagnoser.
"""

import contextlib
import html
import io
import re

import pytest

from backtwice import cli, diagnose, diagnosis, manifest, render
from backtwice import snapshot as snap
from backtwice.errors import EXIT_OUTPUT, ClaimError
from backtwice.render import render_page

from .conftest import REPRO, SNAPSHOTS

MODEL = "loss = nn.functional.mse_loss(model(x), y)"
RNN = "h = rnn(xs[step - 1], h)"
CARRIED = ("carried-state", ("loss.backward()", 1), ("loss.backward()", 1), {RNN})
# Scenario -> (cause, raising line, freeing line, forward lines the node may come from). A line
# is (code, which occurrence). The forward line must lie in what both calls go through: the
# shared features for two losses, the generator's output for a GAN, the whole step for one loss.
KNOWN = {
    "c1_backward_twice": (
        "same-loss-twice",
        ("loss.backward()", 2),
        ("loss.backward()", 1),
        {MODEL},
    ),
    "c2_no_detach": CARRIED,
    "c2_before_loop": (
        "carried-state",
        ("loss.backward()", 1),
        ("loss.backward()", 1),
        {"feats = encoder(x).relu()"},
    ),
    "c2_detach_unassigned": CARRIED,
    "scalar_mul_twice": (
        "same-loss-twice",
        ("loss.backward()", 2),
        ("loss.backward()", 1),
        {"loss = (w * 2.0).sum()"},
    ),
    "anomaly_from_start": CARRIED,
    "anomaly_failing_step": CARRIED,
    "c3_two_backwards": (
        "shared-forward",
        ("loss2.backward()", 1),
        ("loss1.backward()", 1),
        {"feat = body(x).tanh()"},
    ),
    "c3_summed_twice": (
        "same-loss-twice",
        ("loss.backward()", 2),
        ("loss.backward()", 1),
        {
            "feat = body(x).tanh()",
            "loss1 = nn.functional.mse_loss(head1(feat), y1)",
            "loss2 = nn.functional.mse_loss(head2(feat), y2)",
            "loss = loss1 + loss2",
        },
    ),
    "c4_gan_no_detach": (
        "shared-forward",
        ("g_loss.backward()", 1),
        ("d_loss.backward()", 1),
        {"fake = G(torch.randn(4, 2))"},
    ),
    "grad_penalty": (
        "shared-forward",
        ("(loss + penalty).backward()", 1),
        ("(g,) = torch.autograd.grad(loss, x)", 1),
        {MODEL},
    ),
    "grad_twice": (
        "same-loss-twice",
        ("(g,) = torch.autograd.grad(loss, x)", 2),
        ("(g,) = torch.autograd.grad(loss, x)", 1),
        {"loss = (x**3).sum()"},
    ),
    "fw_amp": (
        "same-loss-twice",
        ("scaler.scale(loss).backward()", 2),
        ("scaler.scale(loss).backward()", 1),
        {MODEL},
    ),
    "saved_tensors": (
        "saved-read",
        ('print("y as exp saved it:", y.grad_fn._saved_result)', 1),
        ("(y.sum() + z.sum()).backward()", 1),
        {"y = x.exp()"},
    ),
}


def line_of(source, code, nth):
    """The 1-based number of the nth line whose text, stripped, is `code`."""
    found = [i for i, line in enumerate(source.splitlines(), 1) if line.strip() == code]
    return found[nth - 1]


@pytest.fixture(scope="module")
def snapshots():
    return snap.load_dir(SNAPSHOTS)


@pytest.fixture(scope="module")
def repro():
    return manifest.load(REPRO)


def test_every_scenario_that_raises_this_error_has_a_known_answer(snapshots):
    message = "Trying to backward through the graph a second time"
    for _, snapshot in snapshots:
        raising = {
            i for i, r in snapshot.scenarios.items() if r.raised and message in r.raised.message
        }
        assert raising == set(KNOWN), snapshot.environment.torch


# The diagnoser does not yet report the scalar that `w * 2.0` saves (a wrapped number, not a
# tensor of the reader's); strict, so this fails once diagnose.py learns it.
# Scenarios whose report the diagnoser gets wrong, with why (none since issue 17 found nodes
# that saved only Python numbers).
GAPS = {}


@pytest.mark.parametrize(
    "ident",
    [
        pytest.param(i, marks=pytest.mark.xfail(strict=True, reason=GAPS[i])) if i in GAPS else i
        for i in sorted(KNOWN)
    ],
)
def test_captured_reports_name_the_known_lines_on_every_version(snapshots, repro, ident):
    source = {s.id: s.source for s in repro.scenarios}[ident]
    cause, raises, frees, forward = KNOWN[ident]
    forward_lines = {line_of(source, code, 1) for code in forward}
    for _, snapshot in snapshots:
        run = snapshot.scenarios[ident]
        found = run.diagnosis
        where = f"{ident} on torch {snapshot.environment.torch}"
        assert found.cause == cause, where
        assert found.raised.line == line_of(source, *raises) == run.raised.line, where
        assert found.freed_by.line == line_of(source, *frees), where
        assert found.retain_graph is False, where
        assert found.forward.line in forward_lines, where
        text = found.text.splitlines()
        assert f"cause: {cause}" in text and f"fix: {found.fix}" in text, where
        assert f"--> {ident}.py" in found.text, where
        assert any(re.match(rf" *{found.raised.line} \| ", line) for line in text), where
        assert "^^^" in found.text and " raised here" in found.text or cause == "saved-read", where
        if cause == "carried-state":
            assert "retain_graph=True" not in found.fix, where


def test_scenarios_that_run_get_no_report_but_the_silent_doubling_is_flagged(snapshots):
    for _, snapshot in snapshots:
        for ident, run in snapshot.scenarios.items():
            if run.raised is None:
                assert run.diagnosis.cause is None and run.diagnosis.text is None, ident
        (doubled,) = snapshot.scenarios["nosave_twice"].diagnosis.double_traversals
        assert doubled.first.line < doubled.second.line


def run_under_diagnoser(source, path):
    """Run a loop's source in this process under the diagnoser; return its report."""
    path.write_text(source, encoding="utf-8")
    code = compile(source, str(path), "exec")
    with contextlib.redirect_stderr(io.StringIO()):
        watcher = diagnose.diagnose(script=str(path), shown=path.name)
        with contextlib.suppress(RuntimeError), watcher:
            exec(code, {"__name__": "__main__", "__file__": str(path)})
    return watcher.report


BUILDER = manifest.load_loop_builder(REPRO)
RAISING_LOOPS = [a for a in BUILDER.all_answers() if BUILDER.expected(a)["cause"]]


@pytest.mark.parametrize("answers", RAISING_LOOPS, ids=lambda a: a.key)
def test_every_raising_checker_loop(tmp_path, answers):
    expected = BUILDER.expected(answers)
    report = run_under_diagnoser(BUILDER.build_loop(answers), tmp_path / "loop.py")
    assert report["cause"] == expected["cause"]
    assert report["raised"]["line"] == expected["raises"]
    assert report["freed_by"]["line"] == expected["frees"]
    assert report["node"]["line"] == expected["forward"]
    assert report["checker"] is not None
    checked = dict(part.split("=") for part in report["checker"].lstrip("#").split("&"))
    # The fragment selects answers under which this very loop is captured (a WGAN-GP is under
    # both retain=none and retain=create: its create_graph=True was not added as a retry).
    selected = [
        b for b in BUILDER.all_answers() if all(getattr(b, n) == v for n, v in checked.items())
    ]

    # A WGAN-GP answered 'retain' passes create_graph=True, retain_graph=True, as canonical code
    # does; the fragment may select the same loop without the retain_graph=True beside it.
    def shape(b):
        return BUILDER.build_loop(b).replace(
            "create_graph=True, retain_graph=True)", "create_graph=True)"
        )

    source = shape(answers)
    assert any(shape(b) == source for b in selected), checked


def test_the_page_links_the_diagnoser_beside_it(built_html):
    answer = built_html[built_html.index('<section id="answer"') : built_html.index("</section>")]
    assert '<a href="diagnose.py" download>' in answer  # from the short answer
    section = built_html[built_html.index('<section id="diagnoser"') :]
    assert '<a href="diagnose.py" download>' in section
    assert (
        '<pre class="command" tabindex="0"><code>curl -O <a id="tool-url" href="diagnose.py">'
        in section
    )


def site_build(out):
    """A --render-only build of the committed snapshots into `out`; return its exit code."""
    return cli.main(["--render-only", "--quiet", "--snapshots", str(SNAPSHOTS), "--out", str(out)])


def test_the_build_writes_the_diagnoser_beside_the_page_byte_for_byte(tmp_path):
    assert site_build(tmp_path) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "diagnose.py",
        "frameworks.html",
        "index.html",
    ]
    # Whatever backtwice/diagnose.py holds now, not a stored copy or hash.
    assert (tmp_path / "diagnose.py").read_bytes() == manifest.DIAGNOSER_FILE.read_bytes()


def test_a_diagnoser_left_half_written_by_a_killed_build_is_removed(tmp_path, capsys):
    (tmp_path / ".diagnose.py.a1b2c3d4").write_text("import tor", encoding="utf-8")
    assert cli.main(["--render-only", "--snapshots", str(SNAPSHOTS), "--out", str(tmp_path)]) == 0
    assert (
        f"notice: removed {tmp_path / '.diagnose.py.a1b2c3d4'}, left by" in capsys.readouterr().out
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "diagnose.py",
        "frameworks.html",
        "index.html",
    ]


def test_the_page_and_the_diagnoser_are_written_together_or_not_at_all(tmp_path, capsys):
    (tmp_path / "index.html").write_text("the old page", encoding="utf-8")
    (tmp_path / "diagnose.py").mkdir()  # a folder where the file goes: its rename fails
    assert site_build(tmp_path) == EXIT_OUTPUT
    assert "cannot be written" in capsys.readouterr().err
    assert (tmp_path / "index.html").read_text(encoding="utf-8") == "the old page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["diagnose.py", "index.html"]


def test_the_page_shows_the_captured_reports(built_html, snapshots):
    newest = snapshots[-1][1]
    shown = [
        html.unescape(text)
        for text in re.findall(
            r'<figure class="diagnosis">.*?<pre class="output"[^>]*>(.*?)</pre>', built_html, re.S
        )
    ]
    assert shown == [newest.scenarios[i].diagnosis.text for i in diagnosis.SHOWN]


def test_the_versions_sentence_comes_from_the_snapshots(built_html, snapshots):
    versions = [s.environment.torch for _, s in snapshots]
    # Of the scenarios on the page: the framework loops are on frameworks.html.
    here = render.only(snapshots, lambda ident: not ident.startswith(render.FRAMEWORKS), True)
    sentence = str(diagnosis.versions_sentence(here))
    assert html.escape(versions[0]) in sentence and versions[-1] in sentence
    shown = [i for i in KNOWN if not i.startswith(render.FRAMEWORKS)]
    assert f"for the {len(shown) - len(GAPS)} that raise this error it named the same cause" in (
        sentence
    )
    assert sentence in built_html


def test_a_report_that_contradicts_the_plain_run_stops_the_build(doctor):
    def change(data):
        data["scenarios"]["c2_no_detach"]["diagnosis"]["raised"]["line"] = 3

    with pytest.raises(ClaimError) as caught:
        doctor(change)
    assert (
        "section 'diagnoser': the check 'diagnoser_agrees' failed (for 'c2_no_detach' it "
        in str(caught.value)
    )


def test_a_version_whose_report_differs_is_named(tmp_path, snapshots, snapshot_data):
    import copy
    import json

    folder = tmp_path / "snapshots"
    folder.mkdir()
    for path, _ in snapshots:
        data = json.loads(path.read_text(encoding="utf-8"))
        if path == snapshots[0][0]:
            data = copy.deepcopy(data)
            data["scenarios"]["c4_gan_no_detach"]["diagnosis"]["forward"]["line"] = 2
        (folder / path.name).write_text(json.dumps(data), encoding="utf-8")
    loaded = snap.load_dir(folder)
    sentence = str(diagnosis.versions_sentence(loaded))
    assert sentence.endswith(
        f"error it named other causes or lines on torch {loaded[0][1].environment.torch}."
    )
    render_page(loaded, REPRO)  # still a true page
