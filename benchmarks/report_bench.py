"""Benchmark of run reports (not a test: it prints figures and never fails on noise).

Runs of N steps (a `foreach` over N items of a fast tool; N = 100, 1,000, 10,000) on the
embedded engine, then for each transcript:

  1. Writing the report (chainlang.report: read, build, render), wall and CPU time, against
     reading the transcript alone (chainlang.journal.reader), measured in the same run.
  2. The report's size against the transcript's.
  3. Opening it in headless Chromium (Playwright; skipped without them): the page's load,
     and opening one step's details from the table, against loading a page as big with no
     structure (the transcript in a <pre>), measured in the same run.

Usage: python benchmarks/report_bench.py [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import html
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHAIN = """inputs:
  items: {type: array}
limits: {max_steps: 1000000, max_parallel: 8}
steps:
  - id: each
    foreach: inputs.items
    test.add: {a: "{item}", b: 1}
"""


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall s, CPU s of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def make_run(root: Path, size: int) -> Path:
    root.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "run" / "run_tools.py", root / "tools.py")
    (root / "chainlang.toml").write_text('tools = ["tools.py"]\n', encoding="utf-8")
    (root / "big.chain.yaml").write_text(CHAIN, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "chainlang", "run", "big.chain.yaml", "--input",
                    f"items={list(range(size))}", "--transcript", "big.jsonl", "--progress", "quiet"],
                   cwd=root, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return root / "big.jsonl"


def browser() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    path = os.environ.get("CHAINLANG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        return None
    playwright = sync_playwright().start()
    return playwright, playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])


def load(launched: Any, url: str, click: str | None) -> tuple[float, float | None]:
    """Seconds to the page's load event, and to a step's details after a click on its row."""
    page = launched.new_page(viewport={"width": 1280, "height": 900})
    start = time.perf_counter()
    page.goto(url, wait_until="load", timeout=120_000)
    loaded = time.perf_counter() - start
    opened = None
    if click:
        start = time.perf_counter()
        page.click(click)
        page.wait_for_selector("#detail:not([hidden])")
        opened = time.perf_counter() - start
    page.close()
    return loaded, opened


def main() -> None:
    from chainlang.journal.reader import read_transcript
    from chainlang.report import report_html, report_of

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    print(f"report benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start")
    started = browser()
    if started is None:
        print("(no Playwright or Chromium: the browser figures are left out)")
    with tempfile.TemporaryDirectory() as tmp:
        warm = make_run(Path(tmp) / "warm", 10)  # imports and the templates' compilation, before measuring
        report_html(report_of(warm, trusted=warm.parent))
        for size in sizes:
            transcript = make_run(Path(tmp) / f"run{size}", size)
            _, read_wall, read_cpu = timed(lambda: read_transcript(transcript))
            page, wall, cpu = timed(lambda: report_html(report_of(transcript, trusted=transcript.parent)))
            out = transcript.with_suffix(".html")
            out.write_text(page, encoding="utf-8")
            plain = transcript.with_name("plain.html")
            plain.write_text("<!doctype html><pre>" + html.escape(transcript.read_text(encoding="utf-8")) + "</pre>",
                             encoding="utf-8")
            mb, tmb = out.stat().st_size / 1e6, transcript.stat().st_size / 1e6
            print(f"\n{size:,} steps: transcript {tmb:.2f} MB, report {mb:.2f} MB ({mb / tmb:.2f}x)")
            print(f"  write the report   {wall:6.2f} s wall {cpu:6.2f} s CPU   "
                  f"({wall / read_wall:.1f}x reading the transcript: {read_wall:.2f} s wall {read_cpu:.2f} s CPU)")
            if started is not None:
                loaded, opened = load(started[1], out.as_uri(), f'tr[data-i="{size // 2}"]')
                base, _ = load(started[1], plain.as_uri(), None)
                print(f"  open in Chromium   {loaded:6.2f} s to load ({loaded / base:.1f}x a page as big with no "
                      f"structure: {base:.2f} s); a step's details {opened:.2f} s after the click")
    if started is not None:
        started[1].close()
        started[0].stop()
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
