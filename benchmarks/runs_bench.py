"""Benchmark of what a run costs as a whole (not a test: it prints figures and never fails on noise).

Issue 27's second part: a one-step run or emit in process at most 0.3 ms of CPU, and the
embedded engine at least 2,000 one-step runs a second. In a project made under --dir (kept
when given, else a temporary directory), whose tools are benchmarks/bench_tools.py and whose
hooks file has one hook on the external event `bench.ping` with a one-step action, measured
in turn in the same rounds (each figure per operation: wall median, wall p95, CPU):

  - the floor: what a one-step run must at least do to leave a sealed transcript: open a
    file, write run_started, step_started, step_finished and run_finished (the fields
    chainlang writes, sealed with chainlang.journal.integrity's MAC chain, one write(2)
    each), close it; the tool awaited between the step's two lines;
  - `await project.chain(...).run(...)` of a one-step chain (`bench.noop`), a transcript file
    each in the project's runs directory;
  - the same with the project opened with `transcripts="memory"` (no file: the records in
    the result);
  - `await project.emit("bench.ping", ...)`: the hook fires and its one-step action runs, a
    transcript file each.

CPU is `time.process_time()` (every thread of this process) over the whole batch, divided
by the number of operations. Then the embedded engine's throughput: --burst (1,000) one-step
runs started at once (`asyncio.gather` of `chain.run`, as many runs would arrive in a
server) and finished, per second, with transcript files and in memory, beside the floor's
rate done the same way. The engine is the project's default, the embedded one: the run
admitted, hosted and recorded in this process, on its event loop
(chainlang/runtime/embedded.py, host.py).

Usage: python benchmarks/runs_bench.py [--ops 500] [--rounds 3] [--burst 1000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run_bench's floor writer, when imported from elsewhere

from run_bench import EVENT, TOOLS, SealedLines, bench_noop  # noqa: E402

TARGET_CPU_MS = 0.3  # per one-step run or emit, in process
TARGET_RATE = 2_000  # one-step runs a second on the embedded engine
PING = "bench.ping"

CHAIN = f"""\
chainlang: 1
chain: bench.one
steps:
  - {EVENT}: {{value: 1}}
"""

HOOKS = f"""\
events:
  {PING}:
    description: A benchmark event.
    payload:
      type: object
      properties:
        n: {{type: integer}}
      required: [n]
hooks:
  - id: on-ping
    trigger: post:{PING}
    action:
      - {EVENT}: {{value: 1}}
"""


def make_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "chainlang.toml").write_text("", encoding="utf-8")
    (root / "bench.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    chain = root / "one.chain.yaml"
    chain.write_text(CHAIN, encoding="utf-8")
    return chain


# --------------------------------------------------------------------------- the floor


def one_step_header(chain: Path) -> dict[str, Any]:
    """run_started's fields for the one-step chain, as chainlang writes them (same keys, sizes)."""
    from datetime import datetime

    return {"chain": "bench.one", "file": str(chain.resolve()), "file_sha256": "0" * 64, "inputs": {}, "now": None,
            "started_at": datetime.now().astimezone().isoformat(), "tools": [str(TOOLS)], "resumed": False}


async def floor_run(noop: Callable[..., Any], path: Path, key: bytes, header: dict[str, Any]) -> None:
    """The least a one-step run with a sealed transcript does: open, four sealed lines, close."""
    start = time.perf_counter()
    out = SealedLines(path, key)
    out.write("run_started", header)
    params = {"value": 1}
    out.write("step_started", {"step": "1", "event": EVENT, "attempt": 1, "max_attempts": 1, "params": params})
    t0 = time.perf_counter()
    value = await noop(**params)
    out.write("step_finished", {"step": "1", "event": EVENT, "status": "ok", "result": value, "error": None,
                                "duration_ms": round((time.perf_counter() - t0) * 1000, 3), "attempt": 1})
    out.write("run_finished", {"status": "ok", "outputs": {}, "error": None,
                               "duration_ms": round((time.perf_counter() - start) * 1000, 3)})
    out.close()


# --------------------------------------------------------------------------- timing


@dataclass
class Batch:
    """`ops` operations one after the other: every one's wall time, and the batch's CPU time."""

    walls_ms: list[float]
    cpu_ms: float

    @property
    def median_ms(self) -> float:
        return statistics.median(self.walls_ms)

    @property
    def p95_ms(self) -> float:
        ordered = sorted(self.walls_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]

    @property
    def cpu_per_op_ms(self) -> float:
        return self.cpu_ms / len(self.walls_ms)


async def batch(op: Callable[[int], Awaitable[None]], ops: int) -> Batch:
    gc.collect()
    walls: list[float] = []
    cpu = time.process_time()
    for i in range(ops):
        t0 = time.perf_counter()
        await op(i)
        walls.append((time.perf_counter() - t0) * 1000)
    return Batch(walls, (time.process_time() - cpu) * 1000)


async def burst(op: Callable[[int], Awaitable[None]], n: int) -> tuple[float, float]:
    """(operations a second by wall time, CPU ms per operation) of `n` operations started at once."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(op(i) for i in range(n)))
    return n / (time.perf_counter() - wall), (time.process_time() - cpu) * 1000 / n


# --------------------------------------------------------------------------- main


async def main_async(args: argparse.Namespace, root: Path) -> None:
    import chainlang

    noop = bench_noop()
    chain_file = make_project(root / "project")
    floor_dir = root / "floor"
    floor_dir.mkdir(exist_ok=True)
    key = secrets.token_bytes(32)
    header = one_step_header(chain_file)
    quiet = lambda _text: None  # noqa: E731 - notifications are not what is measured

    files = await chainlang.open_project(chain_file.parent, tools=[str(TOOLS)], notify=quiet)
    memory = await chainlang.open_project(chain_file.parent, tools=[str(TOOLS)], notify=quiet, transcripts="memory")
    on_file, in_memory = files.chain(os.fspath(chain_file)), memory.chain(os.fspath(chain_file))

    async def floor(i: int) -> None:
        await floor_run(noop, floor_dir / f"f{i % 1000}.jsonl", key, header)

    async def run_file(i: int) -> None:
        result = await on_file.run()
        if result.status != "ok" or result.transcript is None:
            raise RuntimeError(f"a run ended {result.status}: {result.error}")

    async def run_memory(i: int) -> None:
        result = await in_memory.run()
        if result.status != "ok" or result.transcript is not None:
            raise RuntimeError(f"a run in memory ended {result.status} (transcript {result.transcript}): {result.error}")

    async def emit(i: int) -> None:
        result = await files.emit(PING, {"n": i})
        if result.status != "ok" or len(result.fired) != 1:
            raise RuntimeError(f"an emit ended {result.status}, {len(result.fired)} hooks fired: {result.error}")

    contenders = [("the floor: open, 4 sealed lines, close", floor),
                  ("chain.run, a transcript file", run_file),
                  ('chain.run, transcripts="memory"', run_memory),
                  ("project.emit, 1 hook, 1-step action", emit)]
    for _, op in contenders:  # warm-up: lazy imports, first-run caches
        for i in range(args.warmup):
            await op(i)

    got: dict[str, list[Batch]] = {}
    for _ in range(args.rounds):  # in turn, so that the machine's other load hits every contender alike
        for label, op in contenders:
            got.setdefault(label, []).append(await batch(op, args.ops))

    print()
    print(f"one operation at a time ({args.ops} a batch, best batch of {args.rounds}; ms per operation)")
    print(f"  {'':<42} {'median':>8} {'p95':>8} {'cpu':>8}   {'x floor cpu':>11}")
    floor_cpu = min(b.cpu_per_op_ms for b in got[contenders[0][0]])
    for label, _ in contenders:
        batches = got[label]
        top = min(batches, key=lambda b: b.cpu_ms)
        cpu = top.cpu_per_op_ms
        judged = "" if label.startswith("the floor") else \
            f"   target <= {TARGET_CPU_MS} ms cpu: {'PASS' if cpu <= TARGET_CPU_MS else 'MISS'}"
        print(f"  {label:<42} {min(b.median_ms for b in batches):8.3f} {min(b.p95_ms for b in batches):8.3f} "
              f"{cpu:8.3f}   {cpu / floor_cpu:11.1f}{judged}")

    print()
    print(f"the embedded engine: {args.burst:,} one-step runs started at once (asyncio.gather), best of {args.rounds}")
    print(f"  {'':<42} {'runs/s':>8} {'cpu ms':>8}")
    bursts = [("the floor, the same way", floor), ("chain.run, a transcript file", run_file),
              ('chain.run, transcripts="memory"', run_memory)]
    rates: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for label, op in bursts:
            rates.setdefault(label, []).append(await burst(op, args.burst))
    for label, _ in bursts:
        rate = max(r for r, _ in rates[label])
        cpu = min(c for _, c in rates[label])
        judged = "" if label.startswith("the floor") else \
            f"   target >= {TARGET_RATE:,}/s: {'PASS' if rate >= TARGET_RATE else 'MISS'}"
        print(f"  {label:<42} {rate:8,.0f} {cpu:8.3f}{judged}")

    await files.aclose()
    await memory.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=500, help="operations a batch (default 500)")
    parser.add_argument("--rounds", type=int, default=3, help="batches of each contender, in turn (default 3)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed operations of each first (default 20)")
    parser.add_argument("--burst", type=int, default=1000, help="runs started at once for the rate (default 1000)")
    parser.add_argument("--dir", default=None, help="where the project goes (kept); default: a temporary directory")
    args = parser.parse_args()
    if min(args.ops, args.rounds, args.burst) < 1 or args.warmup < 0:
        parser.error("--ops, --rounds, --burst: at least 1; --warmup: at least 0")
    print(f"chainlang runs benchmark: Python {platform.python_version()}, {os.cpu_count()} CPU(s), "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    started = time.perf_counter()
    if args.dir:
        root = Path(args.dir).resolve()
        if (root / "project").exists():
            shutil.rmtree(root / "project")  # a fresh project each time: no runs left from before
        print(f"project directory: {root / 'project'} (kept)")
        asyncio.run(main_async(args, root))
    else:
        with tempfile.TemporaryDirectory(prefix="chainlang-runs-") as tmp:
            asyncio.run(main_async(args, Path(tmp)))
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end; total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
