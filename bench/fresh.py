"""Score the diagnoser on a fresh set: cases written from public reports by someone who had not
read the diagnoser (issue 27), with the lines, cause and reference fix worked out by hand.

    python bench/fresh.py [--out DIR] SET [SET ...]      # e.g. bench/fresh/d10a bench/fresh/d10b

Each SET holds NAME.py (markers: `# expect: raises frees forward`, `# expect-cause: C`) and,
for a raising case, NAME.fix.diff, the reference fix. Each case runs under `diagnose.py --try
--json` in a copy of its folder. One line per case: cause and lines right or not, the tries'
outcomes, and whether the first fix that passed (the one `--fix` writes) is the reference's
edit; where it is not, DIR/NAME.txt holds both diffs, to be read: a fix can differ from the
reference and be right, or pass its try and be wrong by intent (detach where a reset is meant).
"""

import argparse
import difflib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DIAGNOSE = ROOT / "backtwice" / "diagnose.py"


def changed(diff):
    """The lines a unified diff removes and adds, stripped: what two fixes are compared by."""
    return [
        line[0] + line[1:].split("#")[0].strip()
        for line in diff
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def score(script, out):
    from tests.diagnose_markers import applied, expected

    text = script.read_text(encoding="utf-8")
    want, headers = expected(script)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / script.parent.name
        shutil.copytree(script.parent, folder)
        report = Path(tmp) / "report.json"
        run = subprocess.run(
            [sys.executable, str(DIAGNOSE), "--try", "--json", str(report), script.name],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=900,
        )
        got = json.loads(report.read_text()) if report.exists() else {}
    at = {
        k: (got.get(v) or {}).get("line")
        for k, v in (("raises", "raised"), ("frees", "freed_by"), ("forward", "node"))
    }
    lines = all(at[k] in want.get(k, [at[k]]) for k in at)
    fixes = got.get("fixes") or []
    first = next((f for f in fixes if f["tried"]["outcome"] == "passed"), None)
    same, reference = None, script.with_suffix(".fix.diff")
    if first is not None and reference.exists():
        ours = list(
            difflib.unified_diff(
                text.splitlines(True),
                applied(text, first["edits"]).splitlines(True),
                script.name,
                script.name,
                n=1,
            )
        )
        theirs = reference.read_text(encoding="utf-8").splitlines(True)
        same = changed(ours) == changed(theirs)
        if not same:
            (out / (script.stem + ".txt")).write_text(
                f"first passing fix: {first['why']}\n\n{''.join(ours)}\nreference:\n"
                f"{''.join(theirs)}\n\nreport:\n{run.stderr[-8000:]}",
                encoding="utf-8",
            )
    return {
        "case": f"{script.parent.name}/{script.stem}",
        "expected": headers.get("cause", [None])[0],
        "cause": got.get("cause") or "none",
        "lines": lines,
        "outcomes": [f["tried"]["outcome"] for f in fixes],
        "passed": first is not None,
        "as_reference": same,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="fresh-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for folder in args.sets:
        for script in sorted(folder.glob("*.py")):
            row = score(script, out)
            rows.append(row)
            print(json.dumps(row), flush=True)
    raising = [r for r in rows if r["expected"] != "none"]
    clean = [r for r in rows if r["expected"] == "none"]
    print(
        f"raising {len(raising)}: cause {sum(r['cause'] == r['expected'] for r in raising)},"
        f" lines {sum(r['lines'] for r in raising)}, some fix passed"
        f" {sum(r['passed'] for r in raising)}, first passing fix as the reference"
        f" {sum(bool(r['as_reference']) for r in raising)} (the others to read: {out});"
        f" clean quiet {sum(r['cause'] == 'none' for r in clean)}/{len(clean)}"
    )


if __name__ == "__main__":
    main()
