"""Run `diagnose.py --try --json` on scripts and say which got a fix that passed its try.

    python bench/try_cases.py [--jobs N] [--out DIR] [SCRIPT ...]

Without scripts: every raising case of tests/diagnose_cases/. Each script runs in its own
folder, as a reader runs it; each report is kept in --out (default: a temporary folder). The
last line counts the scripts with a passing fix; one line per script names the first fix that
passed, or how each failed.
"""

import argparse
import concurrent.futures
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DIAGNOSE = ROOT / "backtwice" / "diagnose.py"


def raising_cases():
    from tests.diagnose_markers import CASES, RAISING

    return [CASES / name for name in RAISING]


def tried(script, out):
    report = out / (script.stem + ".json")
    command = [sys.executable, str(DIAGNOSE), "--try", "--json", str(report), script.name]
    subprocess.run(command, cwd=script.parent, capture_output=True, check=False, timeout=900)
    data = json.loads(report.read_text(encoding="utf-8"))
    fixes = data.get("fixes") or []
    outcomes = [f["tried"]["outcome"] for f in fixes]
    passed = [i + 1 for i, o in enumerate(outcomes) if o == "passed"]
    return script.name, data.get("cause"), outcomes, passed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", type=Path)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    scripts = [p.resolve() for p in args.scripts] or raising_cases()
    out = args.out or Path(tempfile.mkdtemp(prefix="try-cases-"))
    out.mkdir(parents=True, exist_ok=True)
    good = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for name, cause, outcomes, passed in pool.map(lambda s: tried(s, out), scripts):
            good += bool(passed)
            first = f"fix {passed[0]} passed" if passed else "none passed"
            print(f"{name}: {cause}; {first}; tried {outcomes}", flush=True)
    print(f"{good} of {len(scripts)} scripts got a fix that passed its try (reports in {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
