"""Benchmark of MCP steps (not a test: it prints figures and never fails on noise).

A chain of --steps (10) steps, each a call of a tool of a stdio MCP server (a small server
on the MCP SDK's MCPServer, written by the benchmark), run with `chainlang.run_async`
(a new event loop each run, as `chainlang run` has), two ways in the same process:
  - baseline: a session per call (the server started for every step, as chainlang did
    before one session per run: chainlang.registry.mcp.FRESH_SESSION_PER_CALL);
  - pooled: one session per run (the server started by the first step, reused by the rest).
Also the cost of the run with 1 step each way, so the per-step figure is the marginal
cost of a step: (run of N steps - run of 1 step) / (N - 1).
Target: a pooled step costs at most a tenth of a baseline step (wall).

Wall time is shown beside CPU time: this process's (all its threads) plus its children's
(the servers, counted once they have exited: each round waits for that), which other load on
the machine disturbs much less. Each figure is the best of --repeat rounds. The tools'
listing (one more server start, when the registry is built) is done once before the rounds.

Usage: python benchmarks/mcp_bench.py [--steps 10] [--repeat 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

SERVER = '''\
from mcp.server.mcpserver import MCPServer

server = MCPServer("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


server.run()
'''

TARGET_RATIO = 0.1  # a pooled step's wall time, at most this share of a baseline step's


def project(root: Path, steps: int) -> tuple[Path, Path]:
    (root / "server.py").write_text(SERVER, encoding="utf-8")
    (root / "chainlang.toml").write_text(
        f"[mcp.servers.calc]\ncommand = {json.dumps(sys.executable)}\nargs = [\"server.py\"]\n", encoding="utf-8")
    lines = ["steps:"] + [f"  - {{id: s{i}, event: calc.add, params: {{a: {i}, b: 1}}}}" for i in range(steps)]
    lines += ["outputs:", f"  last: \"{{s{steps - 1}.result.result}}\""]
    many = root / "many.chain.yaml"
    many.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one = root / "one.chain.yaml"
    one.write_text("steps:\n  - {id: s0, event: calc.add, params: {a: 0, b: 1}}\noutputs:\n  last: \"{s0.result.result}\"\n",
                   encoding="utf-8")
    return many, one


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _sessions_ended(limit: float = 10.0) -> None:
    """Wait for the pooled sessions of runs that ended to close (their servers exit and are reaped)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        gc.collect()
        if not any(t.name.startswith("mcp-session-") for t in threading.enumerate()):
            return
        time.sleep(0.05)


def one_run(chain: Path, transcript: Path, steps: int) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of `chain` on a new event loop, servers' CPU included."""
    import chainlang

    _sessions_ended()
    wall, cpu, children = time.perf_counter(), time.process_time(), _children_cpu()
    transcript = transcript.with_name(f"{chain.stem}-{time.monotonic_ns()}.jsonl")  # a new one each run
    result = asyncio.run(chainlang.run_async(chain, transcript=transcript))
    wall_ms = (time.perf_counter() - wall) * 1000
    _sessions_ended()
    cpu_ms = (time.process_time() - cpu + _children_cpu() - children) * 1000
    if result.status != "ok" or result.outputs.get("last") != steps:
        raise SystemExit(f"the run of {chain.name} did not end ok with last = {steps}: {result.status} {result.outputs}")
    return wall_ms, cpu_ms


def best(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return min(s[0] for s in samples), min(s[1] for s in samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the scratch project goes (default: the system temp dir)")
    args = parser.parse_args()
    steps = max(2, args.steps)
    from chainlang.registry import mcp

    if args.dir:  # a directory of the user's choosing: made when missing
        os.makedirs(args.dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mcp-bench-", dir=args.dir) as scratch:
        root = Path(scratch)
        many, one = project(root, steps)
        transcript = root / "t.jsonl"
        one_run(one, transcript, 1)  # lists the tools once (kept for the process) and warms imports
        figures: dict[str, dict[int, tuple[float, float]]] = {}
        for mode, fresh in (("baseline (a session per call)", True), ("pooled (one session per run)", False)):
            mcp.FRESH_SESSION_PER_CALL = fresh
            try:
                figures[mode] = {
                    1: best([one_run(one, transcript, 1) for _ in range(args.repeat)]),
                    steps: best([one_run(many, transcript, steps) for _ in range(args.repeat)]),
                }
            finally:
                mcp.FRESH_SESSION_PER_CALL = False
    print(f"MCP steps: a chain of {steps} calc.add steps on a stdio server, best of {args.repeat} "
          "(CPU = this process + the servers)")
    per_step: dict[str, float] = {}
    for mode, runs in figures.items():
        (w1, c1), (wn, cn) = runs[1], runs[steps]
        per_step[mode] = (wn - w1) / (steps - 1)
        print(f"  {mode:32} 1 step {w1:8.1f} ms wall {c1:8.1f} ms CPU | {steps} steps {wn:8.1f} ms wall "
              f"{cn:8.1f} ms CPU | per step {per_step[mode]:7.1f} ms wall {(cn - c1) / (steps - 1):7.1f} ms CPU")
    baseline, pooled = per_step.values()
    if pooled < 0:  # the server's start (seconds) varies more than the nine steps cost: below the noise
        print("  (the pooled per-step figure is below the noise of the server's start: counted as 0)")
    ratio = max(pooled, 0.0) / baseline if baseline > 0 else float("inf")
    verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
    print(f"  pooled step / baseline step: {ratio:.3f} (target <= {TARGET_RATIO}) {verdict}")


if __name__ == "__main__":
    main()
