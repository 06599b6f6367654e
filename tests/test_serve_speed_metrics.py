"""serve's metrics in multiprocess mode (serve --workers N) keep their process id in memory:
no getpid system call per update, and a forked child still counts in its own files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers import clean_env

# run in a fresh interpreter: the library reads PROMETHEUS_MULTIPROC_DIR when it is imported
SCRIPT = textwrap.dedent("""\
    import os, sys
    calls = []
    real_getpid = os.getpid
    def counting_getpid():
        calls.append(1)
        return real_getpid()
    os.getpid = counting_getpid  # before the library binds it as its process identifier
    from chainlang.serve.metrics import Metrics
    metrics = Metrics()
    assert metrics.shared
    before = len(calls)
    for _ in range(100):
        metrics.duplicates.inc()
        metrics.event_seconds.observe(0.01)
    print("getpid per 100 updates:", len(calls) - before)
    child = os.fork()
    if child == 0:  # a forked child counts in a file of its own, as with the library's own class
        metrics.duplicates.inc(5)
        os._exit(0)
    os.waitpid(child, 0)
    files = sorted(name for name in os.listdir(os.environ["PROMETHEUS_MULTIPROC_DIR"]) if name.startswith("counter_"))
    print("counter files:", len(files), f"counter_{child}.db" in files)
    for line in metrics.text().decode().splitlines():
        if line.startswith("chainlang_events_duplicate_total"):
            print(line)
""")


def test_multiprocess_metrics_keep_their_pid_and_see_forks(tmp_path: Path) -> None:
    shared = tmp_path / "metrics"
    shared.mkdir()
    env = clean_env()
    env["PROMETHEUS_MULTIPROC_DIR"] = str(shared)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "getpid per 100 updates: 0", done.stdout
    assert lines[1] == "counter files: 2 True", done.stdout
    assert lines[2] == "chainlang_events_duplicate_total 105.0", done.stdout
