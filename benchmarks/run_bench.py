"""Benchmark of `chainlang run`'s per-step overhead (not a test: it prints figures and never fails on noise).

Measured in one process, against baselines measured in the same run:
  1. a sequential chain of N no-op steps (N = 100, 1,000, 2,000, 10,000), each passing on the
     previous step's result (`{bench.noop.result}`), timed from the transcript's `run_started`
     to its `run_finished`: the `duration_ms` that `run_finished` records (perf_counter inside
     the run; the primary figure) and the difference of the two `ts` stamps (milliseconds).
     Baselines: (a) a hand-written asyncio loop making the same 2,000 calls, bare and with the
     two JSON lines per step that a transcript needs, and (b) a LangGraph linear graph of
     1,000 and 2,000 nodes calling the same function. Targets: chainlang's per-step cost at
     most 0.10x LangGraph's, and its per-step cost at 10,000 steps at most 1.5x the cost at 100;
  2. a `parallel:` group of 1,000 no-op branches vs LangGraph's `Send` fan-out to 1,000
     workers (target: at most 0.10x), with an asyncio TaskGroup doing the same calls as baseline;
  3. the CLI as CI runs it: `chainlang run` of a sequential chain of --cli-steps (10,000) steps in
     a new process with stdout and stderr to a pipe, default progress (plain lines) vs
     `--progress quiet`: per step, the run's own time (run_finished's duration_ms), the process's
     CPU time from the opening of the transcript to its exit (Linux), and the whole process's.
     Target: default progress within 1.2x of quiet per step.

Checking and compiling the chain (`prepare`) happens before `run_started` and is not in the
run figures; it is shown on its own. LangGraph is optional (pip install -e '.[bench]');
without it those figures are skipped. Each figure is the best of --repeat rounds; a round
measures every contender once, in turn, so that other load on the machine hits them alike.
Next to each wall-clock figure is the process CPU time of the same work (for chainlang: from
the moment the transcript is opened, just before `run_started`, to the return of `run_async`),
which other processes on the machine disturb much less.

Usage: python benchmarks/run_bench.py [--repeat 5] [--sizes 100,1000,2000,10000] [--cli-only]
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import gc
import json
import operator
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Callable, TypedDict

TOOLS = Path(__file__).resolve().with_name("bench_tools.py")
EVENT = "bench.noop"
MISSING_LANGGRAPH = "langgraph not installed: pip install -e '.[bench]'"


# --------------------------------------------------------------------------- chains


def sequential_chain(steps: int) -> str:
    """`steps` no-op steps; each one passes on the result of the one before (the most recent bench.noop)."""
    lines = ["chainlang: 1", f"chain: bench.sequential{steps}", f"limits: {{max_steps: {max(steps, 1000) * 2}}}",
             "steps:", f"  - {EVENT}: {{value: 0}}"]
    lines += [f"  - {EVENT}: {{value: \"{{{EVENT}.result}}\"}}"] * (steps - 1)
    return "\n".join(lines) + "\n"


def parallel_chain(branches: int) -> str:
    """One parallel group of `branches` no-op steps, all allowed to run at once."""
    lines = ["chainlang: 1", f"chain: bench.parallel{branches}",
             f"limits: {{max_steps: {max(branches, 1000) * 2}, max_parallel: {branches}}}",
             "steps:", "  - parallel:"]
    lines += [f"      - {EVENT}: {{value: {i}}}" for i in range(branches)]
    lines.append(f"    max_parallel: {branches}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- timing


@dataclass
class Sample:
    wall_ms: float  # for chainlang: run_finished's duration_ms (perf_counter, run_started to run_finished)
    cpu_ms: float  # process CPU time of the same work
    ts_ms: float = 0.0  # chainlang: ts(run_finished) - ts(run_started), millisecond resolution


class Timer:
    """Wall-clock and process CPU time of a `with` block."""

    def __enter__(self) -> Timer:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample = Sample((time.perf_counter() - self._wall) * 1000, (time.process_time() - self._cpu) * 1000)


def best(samples: list[Sample]) -> Sample:
    """The best wall-clock sample, with the best CPU time of all of them."""
    top = min(samples, key=lambda s: s.wall_ms)
    return Sample(top.wall_ms, min(s.cpu_ms for s in samples), top.ts_ms)


# --------------------------------------------------------------------------- chainlang runs


def _ts(record: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(record["ts"]))  # Python 3.11 reads the Z


async def chainlang_run(chain: Path, transcript: Path, steps: int) -> Sample:
    import chainlang

    cpu_at_open: list[float] = []
    result = await chainlang.run_async(chain, {}, transcript=transcript, tools=[str(TOOLS)], progress=None,
                                       on_transcript=lambda _: cpu_at_open.append(time.process_time()))
    cpu_ms = (time.process_time() - cpu_at_open[0]) * 1000
    if result.status != "ok":
        raise RuntimeError(f"{chain.name}: the run ended {result.status}: {result.error or result.diagnostics[:3]}")
    lines = transcript.read_text(encoding="utf-8").splitlines()
    first, last = json.loads(lines[0]), json.loads(lines[-1])
    if first["type"] != "run_started" or last["type"] != "run_finished" or len(lines) != 2 * steps + 2:
        raise RuntimeError(f"{transcript}: expected run_started, {steps} steps (two lines each) and run_finished; "
                           f"got {len(lines)} lines from {first['type']} to {last['type']}")
    transcript.unlink()
    ts_ms = (_ts(last) - _ts(first)).total_seconds() * 1000
    return Sample(float(last["duration_ms"]), cpu_ms, ts_ms)


def prepare_ms(chain: Path) -> float:
    from chainlang.runtime.prepare import prepare

    start = time.perf_counter()
    prepared = prepare(chain, [str(TOOLS)])
    elapsed = (time.perf_counter() - start) * 1000
    if prepared.graph is None:
        raise RuntimeError(f"{chain.name} does not check: {prepared.diagnostics[:3]}")
    return elapsed


# --------------------------------------------------------------------------- asyncio baselines


class _Stamp:
    """ISO 8601 UTC with milliseconds, the per-second prefix cached (as the transcript writer does)."""

    def __init__(self) -> None:
        self.second, self.prefix = -1, ""

    def __call__(self) -> str:
        second, rest = divmod(time.time_ns(), 1_000_000_000)
        if second != self.second:
            self.second, self.prefix = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self.prefix}.{rest // 1_000_000:03d}Z"


class _Lines:
    """The minimal honest transcript: one compact JSON line per record, one write(2) each."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.seq = 0
        self.stamp = _Stamp()
        self.encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

    def write(self, type: str, **fields: Any) -> None:
        self.seq += 1
        record = {"type": type, "run_id": "bench", "seq": self.seq, "ts": self.stamp(), **fields}
        os.write(self.fd, (self.encode(record) + "\n").encode("utf-8"))

    def close(self) -> None:
        os.close(self.fd)


async def asyncio_loop(noop: Callable[..., Any], steps: int) -> Sample:
    """`steps` calls, each passed the previous result."""
    with Timer() as timer:
        value = await noop(value=0)
        for _ in range(steps - 1):
            value = await noop(value=value)
    return timer.sample


async def asyncio_loop_jsonl(noop: Callable[..., Any], steps: int, path: Path) -> Sample:
    """The same calls, plus run_started, step_started + step_finished per call, run_finished."""
    out = _Lines(path)
    with Timer() as timer:
        start = time.perf_counter()
        out.write("run_started", chain="bench", inputs={})
        value: Any = 0
        for i in range(1, steps + 1):
            params = {"value": value}
            out.write("step_started", step=str(i), event=EVENT, attempt=1, params=params)
            t0 = time.perf_counter()
            value = await noop(**params)
            out.write("step_finished", step=str(i), event=EVENT, status="ok", result=value, error=None,
                      duration_ms=round((time.perf_counter() - t0) * 1000, 3), attempt=1)
        out.write("run_finished", status="ok", outputs={}, error=None,
                  duration_ms=round((time.perf_counter() - start) * 1000, 3))
    out.close()
    return timer.sample


async def asyncio_fanout(noop: Callable[..., Any], branches: int, path: Path | None) -> Sample:
    """`branches` calls as tasks of one TaskGroup, results in order; with JSON lines when `path`."""
    out = _Lines(path) if path is not None else None
    results: list[Any] = [None] * branches

    async def one(i: int) -> None:
        if out is None:
            results[i] = await noop(value=i)
            return
        params = {"value": i}
        out.write("step_started", step=f"1.{i + 1}", event=EVENT, attempt=1, params=params)
        t0 = time.perf_counter()
        results[i] = await noop(**params)
        out.write("step_finished", step=f"1.{i + 1}", event=EVENT, status="ok", result=results[i], error=None,
                  duration_ms=round((time.perf_counter() - t0) * 1000, 3), attempt=1)

    with Timer() as timer:
        start = time.perf_counter()
        if out is not None:
            out.write("run_started", chain="bench", inputs={})
        async with asyncio.TaskGroup() as group:
            for i in range(branches):
                group.create_task(one(i))
        if out is not None:
            out.write("run_finished", status="ok", outputs={}, error=None,
                      duration_ms=round((time.perf_counter() - start) * 1000, 3))
    if out is not None:
        out.close()
    assert results == list(range(branches))
    return timer.sample


# --------------------------------------------------------------------------- LangGraph


class LinearState(TypedDict):
    value: Any


class FanState(TypedDict):
    results: Annotated[list[Any], operator.add]


class Item(TypedDict):
    value: Any


def langgraph_version() -> str | None:
    try:
        import langgraph.graph  # noqa: F401
    except ImportError:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("langgraph")
    except PackageNotFoundError:
        return "?"


def langgraph_linear(noop: Callable[..., Any], nodes: int) -> Any:
    """START -> n0 -> n1 -> ... -> END, each node calling noop on the previous value."""
    from langgraph.graph import END, START, StateGraph

    async def step(state: LinearState) -> dict[str, Any]:
        return {"value": await noop(value=state["value"])}

    graph = StateGraph(LinearState)
    previous = START
    for i in range(nodes):
        graph.add_node(f"n{i}", step)
        graph.add_edge(previous, f"n{i}")
        previous = f"n{i}"
    graph.add_edge(previous, END)
    return graph.compile()


def langgraph_fanout(noop: Callable[..., Any], branches: int) -> Any:
    """START sends one `work` task per item (Send); the results are reduced with operator.add."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    async def work(state: Item) -> dict[str, Any]:
        return {"results": [await noop(value=state["value"])]}

    def fan_out(state: FanState) -> list[Any]:
        return [Send("work", {"value": i}) for i in range(branches)]

    graph = StateGraph(FanState)
    graph.add_node("work", work)
    graph.add_conditional_edges(START, fan_out, ["work"])
    graph.add_edge("work", END)
    return graph.compile()


async def invoke(graph: Any, state: dict[str, Any], limit: int) -> tuple[Sample, Any]:
    with Timer() as timer:
        out = await graph.ainvoke(state, {"recursion_limit": limit})
    return timer.sample, out


# --------------------------------------------------------------------------- the CLI, output to a pipe


@dataclass
class CliSample:
    run_ms: float  # run_finished's duration_ms
    run_cpu_ms: float | None  # CPU time of the process from the transcript's opening to its exit (Linux)
    wall_ms: float  # the whole process
    cpu_ms: float  # the whole process: user + system


def _process_cpu_ns(pid: int) -> int | None:
    """CPU time so far of all threads of a running process (Linux /proc), in nanoseconds."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        total = 0
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as stat:
                total += int(stat.read().split()[0])
        return total
    except (OSError, ValueError, IndexError):
        return None


def cli_run(chain: Path, transcript: Path, steps: int, quiet: bool) -> CliSample:
    """`chainlang run CHAIN` in a new process, stdout and stderr read through pipes (as CI does).
    The child's CPU time is read when it announces its transcript (just before `run_started`), so
    that what comes after (the run, the last lines written, the exit) can be told from the start-up,
    the check and the compilation before it."""
    import threading

    cmd = [sys.executable, "-m", "chainlang.cli", "run", str(chain), "--tools", str(TOOLS), "--transcript",
           str(transcript)] + (["--progress", "quiet"] if quiet else [])
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    env["NO_COLOR"] = "1"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    lines: list[bytes] = []
    at_open: int | None = None
    for line in proc.stderr:
        if at_open is None and line.startswith(b"transcript: "):
            at_open = _process_cpu_ns(proc.pid)
        lines.append(line)
    reader.join()
    returncode = proc.wait()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    expected = 1 if quiet else steps + 3  # transcript:, the run's start, a line per step, its finish
    if returncode != 0 or len(lines) != expected:
        raise RuntimeError(f"{chain.name} ({'quiet' if quiet else 'default progress'}): exit {returncode}, "
                           f"{len(lines)} lines on stderr, expected {expected}: {lines[-3:]!r}")
    last = json.loads(transcript.read_text(encoding="utf-8").splitlines()[-1])
    transcript.unlink()
    run_cpu = None if at_open is None else cpu * 1000 - at_open / 1e6
    return CliSample(float(last["duration_ms"]), run_cpu, wall * 1000, cpu * 1000)


def cli_bench(tmp: Path, steps: int, repeat: int) -> None:
    chain = tmp / f"cli{steps}.chain.yaml"
    chain.write_text(sequential_chain(steps), encoding="utf-8")
    counter = iter(range(1_000_000))
    samples: dict[bool, list[CliSample]] = {True: [], False: []}
    cli_run(chain, tmp / "cli-warm.jsonl", steps, False)  # warm the file system caches
    for _ in range(repeat):  # in turn, so that a change in the machine's load hits both modes alike
        for quiet in (True, False):
            samples[quiet].append(cli_run(chain, tmp / f"cli{next(counter)}.jsonl", steps, quiet))

    def low(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return min(known) if known else None

    def per_step(value: float | None) -> str:
        return f"{'-':>10}" if value is None else f"{value * 1000 / steps:10.2f}"

    print()
    print(f"chainlang run through the CLI, stdout and stderr to a pipe (what CI sees), {steps:,} steps")
    print(f"  {'':<34} {'run µs':>10} {'run cpu µs':>10} {'proc wall':>10} {'proc cpu':>10}   per step")
    best: dict[bool, tuple[float, float | None]] = {}
    for quiet in (True, False):
        got = samples[quiet]
        run, run_cpu = min(s.run_ms for s in got), low([s.run_cpu_ms for s in got])
        best[quiet] = (run, run_cpu)
        label = "--progress quiet" if quiet else "default progress (plain lines)"
        median = statistics.median(s.run_ms for s in got) * 1000 / steps
        print(f"  {label:<34} {per_step(run)} {per_step(run_cpu)} {per_step(min(s.wall_ms for s in got))} "
              f"{per_step(min(s.cpu_ms for s in got))}   run median {median:.2f}")
    print("  (run: run_finished's duration_ms; run cpu: the process's CPU time from the opening of the transcript,\n"
          "   just before run_started, to its exit, so with the last lines written; proc: the whole process,\n"
          "   with start-up, checking and compiling the chain)")
    (quiet_run, quiet_cpu), (plain_run, plain_cpu) = best[True], best[False]
    print(f"  {'default / quiet per step':<34} {plain_run / quiet_run:10.3f} "
          + (f"{plain_cpu / quiet_cpu:10.3f}" if plain_cpu is not None and quiet_cpu is not None else f"{'-':>10}")
          + f"   target <= 1.2: run {verdict(plain_run / quiet_run, 1.2)}"
          + (f", run cpu {verdict(plain_cpu / quiet_cpu, 1.2)}" if plain_cpu is not None and quiet_cpu else ""))


# --------------------------------------------------------------------------- report


def verdict(value: float, target: float) -> str:
    return "PASS" if value <= target else "MISS"


def row(label: str, n: int | str, sample: Sample | None, per: int | None, note: str = "") -> None:
    """One line: per-step µs (wall, cpu) when `per` is the step count, else totals in ms."""
    if sample is None:
        figures = f"{'-':>10} {'-':>10}"
    elif per:
        figures = f"{sample.wall_ms * 1000 / per:10.2f} {sample.cpu_ms * 1000 / per:10.2f}"
    else:
        figures = f"{sample.wall_ms:10.1f} {sample.cpu_ms:10.1f}"
    print(f"  {label:<40} {n!s:>6} {figures}   {note}".rstrip())


def ratio_line(label: str, wall: float, cpu: float, target: float | None, note: str = "") -> None:
    judged = f"target <= {target:<4g} {verdict(wall, target)}" if target is not None else ""
    print(f"  {label:<50} {wall:7.3f} {cpu:7.3f}   {judged}{note}".rstrip())


async def main_async(args: argparse.Namespace) -> None:
    from chainlang.registry.loading import load_tools

    # the function chainlang calls: the loader caches the module, so the runs below reuse this object
    noop = next(spec.func for spec in load_tools([str(TOOLS)], TOOLS.parent) if spec.name == EVENT)
    assert noop is not None
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    graph_sizes = sorted({int(s) for s in args.graph_sizes.split(",") if s.strip()})
    baseline_steps = args.baseline_steps
    branches = args.branches
    lg = langgraph_version()
    started = time.perf_counter()

    print(f"chainlang run benchmark: Python {platform.python_version()}, langgraph {lg or '-'}, "
          f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}, best of {args.repeat} rounds")
    if args.cli_only:
        with tempfile.TemporaryDirectory(prefix="chainlang-bench-") as tmp_name:
            cli_bench(Path(tmp_name), args.cli_steps, args.repeat)
        print(f"\nload average {os.getloadavg()[0]:.2f} at the end; total {time.perf_counter() - started:.0f} s")
        return
    if lg is None:
        print(MISSING_LANGGRAPH)

    with tempfile.TemporaryDirectory(prefix="chainlang-bench-") as tmp_name:
        tmp = Path(tmp_name)
        chains = {n: tmp / f"seq{n}.chain.yaml" for n in sizes}
        for n, path in chains.items():
            path.write_text(sequential_chain(n), encoding="utf-8")
        fan_chain = tmp / f"par{branches}.chain.yaml"
        fan_chain.write_text(parallel_chain(branches), encoding="utf-8")
        counter = iter(range(1_000_000))

        def transcript() -> Path:
            return tmp / f"run{next(counter)}.jsonl"

        # warm-up (lazy imports, first-run caches): not measured
        warm = tmp / "warm.chain.yaml"
        warm.write_text(sequential_chain(10), encoding="utf-8")
        await chainlang_run(warm, transcript(), 10)
        await chainlang_run(fan_chain, transcript(), branches)

        prep = {n: prepare_ms(chains[n]) for n in sizes}
        graphs: dict[int, tuple[Any, float]] = {}  # nodes -> (compiled graph, compile ms)
        fan_graph: tuple[Any, float] | None = None
        if lg is not None:
            for n in graph_sizes:
                t0 = time.perf_counter()
                graphs[n] = (langgraph_linear(noop, n), (time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            fan_graph = (langgraph_fanout(noop, branches), (time.perf_counter() - t0) * 1000)

        # Every round measures each contender once, in turn, so that a change in the
        # machine's load (other processes) hits all of them alike.
        samples: dict[str, list[Sample]] = {}

        def keep(key: str, sample: Sample) -> None:
            samples.setdefault(key, []).append(sample)

        for _ in range(args.repeat):
            for n in sizes:
                gc.collect()
                keep(f"chain{n}", await chainlang_run(chains[n], transcript(), n))
            gc.collect()
            keep("bare", await asyncio_loop(noop, baseline_steps))
            gc.collect()
            keep("jsonl", await asyncio_loop_jsonl(noop, baseline_steps, transcript()))
            for n, (graph, _) in graphs.items():
                gc.collect()
                sample, out = await invoke(graph, {"value": 0}, n + 10)
                assert out == {"value": 0}, out
                keep(f"graph{n}", sample)
            gc.collect()
            keep("fan", await chainlang_run(fan_chain, transcript(), branches))
            gc.collect()
            keep("fan_bare", await asyncio_fanout(noop, branches, None))
            gc.collect()
            keep("fan_jsonl", await asyncio_fanout(noop, branches, transcript()))
            if fan_graph is not None:
                gc.collect()
                sample, out = await invoke(fan_graph[0], {"results": []}, 25)
                assert sorted(out["results"]) == list(range(branches)), len(out["results"])
                keep("fan_graph", sample)
        del graphs, fan_graph

    top = {key: best(values) for key, values in samples.items()}
    chain = {n: top[f"chain{n}"] for n in sizes}
    graph_runs = {n: top[f"graph{n}"] for n in graph_sizes if f"graph{n}" in top}

    print()
    print("sequential chain of no-op steps, each passing on the previous result")
    print(f"  {'':<40} {'steps':>6} {'µs/step':>10} {'cpu µs':>10}")
    for n in sizes:
        median = statistics.median(s.wall_ms for s in samples[f"chain{n}"]) * 1000 / n
        row("chainlang run (run_finished duration)", n, chain[n], n,
            f"median {median:.2f}; ts {chain[n].ts_ms:.0f} ms; prepare (once) {prep[n]:.0f} ms "
            f"({prep[n] * 1000 / n:.0f} µs/step) not in the run")
    row("asyncio loop, bare calls", baseline_steps, top["bare"], baseline_steps)
    row("asyncio loop, calls + 2 JSON lines/step", baseline_steps, top["jsonl"], baseline_steps,
        "the minimal honest work: call + record")
    if lg is None:
        row("LangGraph linear graph", "-", None, None, MISSING_LANGGRAPH)
    for n, sample in graph_runs.items():
        median = statistics.median(s.wall_ms for s in samples[f"graph{n}"]) * 1000 / n
        row("LangGraph linear graph (ainvoke)", n, sample, n, f"median {median:.2f}; compile not counted")

    print()
    print(f"parallel fan-out of {branches:,} no-op branches")
    print(f"  {'':<40} {'width':>6} {'total ms':>10} {'cpu ms':>10}")
    fan = top["fan"]
    row("chainlang parallel group", branches, fan, None,
        f"median {statistics.median(s.wall_ms for s in samples['fan']):.1f}; ts {fan.ts_ms:.0f} ms")
    row("asyncio TaskGroup, bare calls", branches, top["fan_bare"], None)
    row("asyncio TaskGroup, calls + 2 JSON lines", branches, top["fan_jsonl"], None)
    if "fan_graph" in top:
        row("LangGraph Send fan-out (ainvoke)", branches, top["fan_graph"], None,
            f"median {statistics.median(s.wall_ms for s in samples['fan_graph']):.1f}; compile not counted")
    else:
        row("LangGraph Send fan-out", branches, None, None, MISSING_LANGGRAPH)

    print()
    print("ratios (targets are information only: this benchmark never fails)")
    print(f"  {'':<50} {'wall':>7} {'cpu':>7}")

    def ratio(a: Sample, a_n: int, b: Sample, b_n: int) -> tuple[float, float]:
        return (a.wall_ms / a_n) / (b.wall_ms / b_n), (a.cpu_ms / a_n) / (b.cpu_ms / b_n)

    if baseline_steps in chain:
        ratio_line(f"chainlang / asyncio calls + JSON lines, {baseline_steps:,} steps",
                   *ratio(chain[baseline_steps], baseline_steps, top["jsonl"], baseline_steps), None,
                   "interpreter overhead over the minimal honest work")
    for n, sample in graph_runs.items():
        if n in chain:
            ratio_line(f"chainlang / LangGraph per step, {n:,} steps", *ratio(chain[n], n, sample, n), 0.10)
    if "fan_graph" in top:
        ratio_line(f"chainlang / LangGraph fan-out, {branches:,} branches", *ratio(fan, 1, top["fan_graph"], 1),
                   0.10)
    if 100 in chain and 10_000 in chain:
        ratio_line("per-step cost at 10,000 steps / at 100", *ratio(chain[10_000], 10_000, chain[100], 100), 1.5)
    if 1000 in chain and 10_000 in chain:
        ratio_line("per-step cost at 10,000 steps / at 1,000", *ratio(chain[10_000], 10_000, chain[1000], 1000),
                   None, "(no fixed per-run cost in either)")
    with tempfile.TemporaryDirectory(prefix="chainlang-bench-") as tmp_name:
        cli_bench(Path(tmp_name), args.cli_steps, args.repeat)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end; total {time.perf_counter() - started:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds; each figure is the best of them (default 5)")
    parser.add_argument("--sizes", default="100,1000,2000,10000", help="chain lengths (default 100,1000,2000,10000)")
    parser.add_argument("--graph-sizes", default="1000,2000", help="LangGraph graph lengths (default 1000,2000)")
    parser.add_argument("--baseline-steps", type=int, default=2000, help="asyncio loop length (default 2000)")
    parser.add_argument("--branches", type=int, default=1000, help="fan-out width, 1 to 1024 (default 1000)")
    parser.add_argument("--cli-steps", type=int, default=10_000,
                        help="steps of the chain run through the CLI with output to a pipe (default 10000)")
    parser.add_argument("--cli-only", action="store_true", help="only the CLI runs with output to a pipe")
    args = parser.parse_args()
    if not 1 <= args.branches <= 1024:
        parser.error("--branches: a parallel group runs 1 to 1024 branches at once")
    if args.repeat < 1:
        parser.error("--repeat: at least 1")
    if args.cli_steps < 1:
        parser.error("--cli-steps: at least 1")

    # An editable checkout under PYTHONDONTWRITEBYTECODE=1 would compile every module on
    # import; compile once so the figures measure what an installed wheel runs.
    import chainlang

    compileall.compile_dir(str(Path(chainlang.__file__).parent), quiet=1)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
