"""Time the checker in Chromium: python bench/checker_frame.py [--rounds N].

For every combination the checker offers, sets the answers, fires the form's change event, and
measures the time until the result is in the DOM ("update") and until its layout is computed
("layout", forced by reading the result's height): the work that must fit before the next frame.
Target: within one frame (16 ms). Builds the page from the committed snapshots first.
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backtwice import snapshot as snap  # noqa: E402
from backtwice.render import render_page  # noqa: E402
from tests.conftest import CHROMIUM_FLAGS, chromium_executable  # noqa: E402

MEASURE = """async (rounds) => {
  const form = document.getElementById("checker");
  const data = JSON.parse(document.getElementById("checker-data").textContent);
  const names = data.names;
  const keys = [...document.querySelectorAll("#loops tbody tr")].map((row) => row.id.slice(5));
  const result = document.getElementById("result");
  const update = [], layout = [];
  for (let r = -1; r < rounds; r++) {  // round -1 warms the JIT up and is not counted
    for (const key of keys) {
      const parts = key.split("-");  // only the reach "lstm-both" holds a "-" itself
      const values = parts.length > 4 ? [parts[0], parts[1], parts[2] + "-" + parts[3], parts[4]] : parts;
      names.forEach((n, i) => {
        for (const input of form.querySelectorAll(`input[name='${n}']`)) input.checked = input.value === values[i];
      });
      const start = performance.now();
      form.dispatchEvent(new Event("change", { bubbles: true }));
      const updated = performance.now() - start;
      void result.offsetHeight;
      if (r >= 0) { update.push(updated); layout.push(performance.now() - start); }
      await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
    }
  }
  return { update, layout };
}"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "index.html"
        page_path.write_text(
            render_page(snap.load_dir(ROOT / "snapshots"), ROOT / "repro"), encoding="utf-8"
        )
        with sync_playwright() as p:
            executable = chromium_executable()
            browser = p.chromium.launch(
                args=CHROMIUM_FLAGS, **({"executable_path": executable} if executable else {})
            )
            page = browser.new_page()
            page.goto(page_path.as_uri())
            times = page.evaluate(MEASURE, args.rounds)
            browser.close()
    for name in ("update", "layout"):
        values = sorted(times[name])
        p95 = values[int(0.95 * (len(values) - 1))]
        print(
            f"{name:6} over {len(values)} changes: median {statistics.median(values):5.2f} ms, "
            f"p95 {p95:5.2f} ms, max {values[-1]:5.2f} ms (target: within one 16 ms frame)"
        )


if __name__ == "__main__":
    main()
