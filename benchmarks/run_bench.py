"""Benchmark of `chainlang run`'s per-step overhead (not a test: it prints figures and never fails on noise).

Measured against baselines measured in the same run (targets: issue 27):
  1. in process: a sequential chain of N no-op steps (N = 20, 200, 2,000, 20,000), each passing
     on the previous step's result (`{bench.noop.result}`), timed from the transcript's
     `run_started` to its `run_finished`: the `duration_ms` that `run_finished` records
     (perf_counter inside the run; the primary figure) and the difference of the two `ts`
     stamps (milliseconds). Baselines: (a) hand-written asyncio loops making the same 2,000
     calls: bare; with two unsealed JSON lines per step; and THE FLOOR: each step's parameter
     rendered from the chain's template (a whole-value reference: the value itself) and the
     records a chainlang transcript holds (run_started, step_started and step_finished per
     step with the same fields, run_finished), sealed with chainlang.journal.integrity's MAC
     chain, one write(2) per line; (b) a LangGraph linear graph of 200 and 2,000 nodes calling
     the same function. Targets: at most 1.5x the floor, at most 0.15x LangGraph per step;
  2. a `parallel:` group of 1,000 no-op branches vs LangGraph's `Send` fan-out to 1,000
     workers (target: at most 0.15x), with an asyncio TaskGroup doing the same calls as baseline;
  3. the CLI as CI runs it: `chainlang run` of sequential chains of 20, 200, 2,000 and 20,000
     steps (--cli-sizes) in a new process with a transcript, stdout and stderr to a pipe, default
     progress (plain lines), and the 2,000-step one (--cli-steps) with `--progress quiet` too:
     per step, the run's own time (run_finished's duration_ms), the process's CPU time between
     the run's first and last progress lines and from the opening of the transcript to its exit
     (Linux, /proc), and the whole process's. Targets on the 2,000-step chain: at most 25 µs a
     step, at most 1.5x the floor, at most 0.15x LangGraph per node; default progress within
     1.2x of quiet;
  4. the scaling lines: per-step cost by chain length, in process and through the CLI, with a
     verdict: flat or linear when the cost per step at the longest is within 1.5x of the cost
     at 200 steps (judged on CPU, which the machine's other load disturbs less), else worse.

Checking and compiling the chain (`prepare`) happens before `run_started` and is not in the
run figures; it is shown on its own. LangGraph is optional (pip install -e '.[bench]');
without it those figures are skipped. Each figure is the best of --repeat rounds; a round
measures every contender once, in turn, so that other load on the machine hits them alike.
Next to each wall-clock figure is the process CPU time of the same work (for chainlang: from
the moment the transcript is opened, just before `run_started`, to the return of `run_async`),
which other processes on the machine disturb much less.

Usage: python benchmarks/run_bench.py [--repeat 5] [--sizes 20,200,2000,20000] [--cli-sizes 20,200,2000,20000]
                                     [--cli-steps 2000] [--cli-only] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import gc
import hashlib
import json
import operator
import os
import platform
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Callable, TypedDict, cast

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
    from chainlang.engine import entry  # the internal entry: it takes progress= and on_transcript=

    cpu_at_open: list[float] = []
    result = await entry.run_async(chain, {}, transcript=transcript, tools=[str(TOOLS)], progress=None,
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


class SealedLines:
    """The floor's transcript: the records a chainlang transcript holds, sealed as chainlang
    seals them, one write(2) per line. Each record is the envelope (type, run_id, seq, ts)
    then the fields, encoded compact (ensure_ascii=False, allow_nan=False), and sealed with
    chainlang.journal.integrity (its keyed BLAKE2b MAC over the previous MAC and the line up
    to `,"mac":`, chained from GENESIS). The key is made once per process (a project
    reads its key once). What it does not do: no lock file and no sealed head, no
    redaction or secret checks, no record classes: the least a sealed transcript needs."""

    def __init__(self, path: Path, key: bytes) -> None:
        from chainlang.journal import integrity

        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self.seq = 0
        self.stamp = _Stamp()
        self.run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(5)  # chainlang's form
        self.encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
        sealer = getattr(integrity, "Sealer", None)  # keyed once per writer where the module has it
        self.seal: Callable[[bytes, bytes], tuple[bytes, bytes]] = (
            sealer(key).seal if sealer is not None else lambda previous, line: integrity.seal(key, previous, line))
        self.previous = integrity.GENESIS

    def write(self, type: str, fields: dict[str, Any]) -> None:
        self.seq += 1
        record = {"type": type, "run_id": self.run_id, "seq": self.seq, "ts": self.stamp(), **fields}
        line, self.previous = self.seal(self.previous, (self.encode(record) + "\n").encode("utf-8"))
        os.write(self.fd, line)

    def close(self) -> None:
        os.close(self.fd)


def render_param(template: Any, results: dict[str, dict[str, Any]]) -> Any:
    """What chainlang does for a parameter whose text is one whole reference, such as
    `{bench.noop.result}`: the referenced value itself (not its text), looked up in the
    results of the run so far; any other value is passed as it is. Plain string work: is it
    `{...}` with no other brace, split off the member at the last dot, two dict look-ups."""
    if type(template) is str and len(template) > 2 and template[0] == "{" and template[-1] == "}" \
            and "{" not in template[1:-1]:
        event, _, member = template[1:-1].rpartition(".")
        return results[event][member]
    return template


def run_header(chain: Path, steps: int) -> dict[str, Any]:
    """run_started's fields, as chainlang writes them for a run of `chain` (the same keys and
    sizes; the digest of the chain's text is made when the chain is prepared, not in the run)."""
    text = chain.read_text(encoding="utf-8") if chain.exists() else sequential_chain(steps)
    return {"chain": f"bench.sequential{steps}", "file": str(chain.resolve()),
            "file_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "inputs": {}, "now": None,
            "started_at": datetime.now().astimezone().isoformat(), "tools": [str(TOOLS)], "resumed": False}


async def asyncio_floor(noop: Callable[..., Any], steps: int, path: Path, key: bytes,
                        header: dict[str, Any]) -> Sample:
    """The floor of issue 27: `steps` calls in a loop, each step's parameter rendered from
    the chain's template (`render_param`), with the transcript chainlang writes: run_started,
    step_started and step_finished per step (the same fields), run_finished, every line sealed
    and written with one write(2)."""
    templates = [{"value": 0}] + [{"value": "{bench.noop.result}"}] * (steps - 1)  # the chain's steps
    with Timer() as timer:
        start = time.perf_counter()
        out = SealedLines(path, key)
        out.write("run_started", header)
        results: dict[str, dict[str, Any]] = {}
        for i, template in enumerate(templates, 1):
            params = {name: render_param(value, results) for name, value in template.items()}
            step = str(i)
            out.write("step_started", {"step": step, "event": EVENT, "attempt": 1, "max_attempts": 1, "params": params})
            t0 = time.perf_counter()
            value = await noop(**params)
            results[EVENT] = {"result": value}
            out.write("step_finished", {"step": step, "event": EVENT, "status": "ok", "result": value, "error": None,
                                        "duration_ms": round((time.perf_counter() - t0) * 1000, 3), "attempt": 1})
        out.write("run_finished", {"status": "ok", "outputs": {}, "error": None,
                                   "duration_ms": round((time.perf_counter() - start) * 1000, 3)})
        out.close()
    return timer.sample


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
    run_cpu_ms: float | None  # CPU time of the process between the run's first and last progress lines
    exit_cpu_ms: float | None  # CPU time of the process from the transcript's opening to its exit (Linux)
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
    The child's CPU time is read (from /proc, all its live threads) when it announces its
    transcript (just before the run's last lazy imports and `run_started`), and with the
    default progress when its first progress line (the run's start) and its last one (the
    run's end) arrive: the run's CPU is the difference of the last two, read a little late
    each time (the parent wakes up after the child wrote), which shifts both ends alike.
    From the announcement to the exit includes the interpreter's shut-down."""
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
    at_open = at_start = at_end = None
    for line in proc.stderr:
        if at_open is None and line.startswith(b"transcript: "):
            at_open = _process_cpu_ns(proc.pid)
        elif at_open is not None and len(lines) == 1:
            at_start = _process_cpu_ns(proc.pid)
        elif at_start is not None and line.startswith(b"run "):
            at_end = _process_cpu_ns(proc.pid)
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
    run_cpu = None if at_start is None or at_end is None else (at_end - at_start) / 1e6
    if float(last["duration_ms"]) < 20:  # the parent's wake-ups after the lines are as long as the run: no figure
        run_cpu = None
    exit_cpu = None if at_open is None else cpu * 1000 - at_open / 1e6
    return CliSample(float(last["duration_ms"]), run_cpu, exit_cpu, wall * 1000, cpu * 1000)


def cli_bench(tmp: Path, sizes: list[int], headline: int, repeat: int) -> dict[tuple[int, bool], CliSample]:
    """`chainlang run` through the CLI, output to a pipe: chains of every size in `sizes` with
    the default progress, and the `headline` one with `--progress quiet` too. Returns the best
    figures by (steps, quiet); each field is the best of its own (the CPU figures disturbed
    least by the machine's other load)."""
    chains = {}
    for n in sizes:
        chains[n] = tmp / f"cli{n}.chain.yaml"
        chains[n].write_text(sequential_chain(n), encoding="utf-8")
    counter = iter(range(1_000_000))
    samples: dict[tuple[int, bool], list[CliSample]] = {}
    cli_run(chains[headline], tmp / "cli-warm.jsonl", headline, False)  # warm the file system caches
    for _ in range(repeat):  # in turn, so that a change in the machine's load hits every figure alike
        for n in sizes:
            for quiet in ((True, False) if n == headline else (False,)):
                got = cli_run(chains[n], tmp / f"cli{next(counter)}.jsonl", n, quiet)
                samples.setdefault((n, quiet), []).append(got)

    def low(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return min(known) if known else None

    def run_cpu(got: list[CliSample]) -> float | None:  # none when the best run is too short to read (see cli_run)
        return low([s.run_cpu_ms for s in got]) if min(s.run_ms for s in got) >= 20 else None

    top = {key: CliSample(min(s.run_ms for s in got), run_cpu(got), low([s.exit_cpu_ms for s in got]),
                          min(s.wall_ms for s in got), min(s.cpu_ms for s in got))
           for key, got in samples.items()}

    def per_step(value: float | None, steps: int) -> str:
        return f"{'-':>10}" if value is None else f"{value * 1000 / steps:10.2f}"

    print()
    print("chainlang run through the CLI, a transcript, stdout and stderr to a pipe (what CI sees)")
    print(f"  {'':<34} {'steps':>6} {'run µs':>10} {'run cpu µs':>10} {'to exit cpu':>11} {'proc wall':>10} "
          f"{'proc cpu':>10}   per step")
    for (n, quiet), got in sorted(top.items(), key=lambda item: (item[0][0], not item[0][1])):
        label = "--progress quiet" if quiet else "default progress (plain lines)"
        median = statistics.median(s.run_ms for s in samples[(n, quiet)]) * 1000 / n
        print(f"  {label:<34} {n:>6} {per_step(got.run_ms, n)} {per_step(got.run_cpu_ms, n)} "
              f" {per_step(got.exit_cpu_ms, n)} {per_step(got.wall_ms, n)} {per_step(got.cpu_ms, n)}   "
              f"run median {median:.2f}")
    print("  (run: run_finished's duration_ms; run cpu: the process's CPU time between its first and last progress\n"
          "   lines (the run's start and end; default progress only); to exit cpu: from the announcement of the\n"
          "   transcript to the exit: the run, the last lazy imports before it and the interpreter's shut-down after;\n"
          "   proc: the whole process, with start-up, checking and compiling the chain)")
    quiet_top, plain_top = top[(headline, True)], top[(headline, False)]
    plain_cpu, quiet_cpu = plain_top.exit_cpu_ms, quiet_top.exit_cpu_ms
    print(f"  {f'default / quiet per step, {headline:,}':<41} {plain_top.run_ms / quiet_top.run_ms:10.3f} "
          + (f"{plain_cpu / quiet_cpu:10.3f}" if plain_cpu is not None and quiet_cpu else f"{'-':>10}")
          + f"   (cpu: to exit) target <= 1.2: run {verdict(plain_top.run_ms / quiet_top.run_ms, 1.2)}"
          + (f", to exit cpu {verdict(plain_cpu / quiet_cpu, 1.2)}" if plain_cpu is not None and quiet_cpu else ""))
    return top


def per_step_or_none(total_ms: float | None, steps: int) -> float | None:
    return None if total_ms is None else total_ms * 1000 / steps


def scaling_line(label: str, per_step: dict[int, tuple[float, float | None]]) -> None:
    """Per-step cost (wall, cpu µs) at each size, relative to the cost at 200 steps (or the
    smallest size above 20), and the verdict: flat or linear when the per-step cost at the
    largest size is within 1.5x of that (the run's cost grows at most linearly), else worse."""
    sizes = sorted(per_step)
    base = 200 if 200 in per_step else next((n for n in sizes if n > 20), sizes[0])
    print(f"  {label}")
    for n in sizes:
        wall, cpu = per_step[n]
        base_wall, base_cpu = per_step[base]
        cpu_text = "-" if cpu is None else f"{cpu:.2f}"
        cpu_ratio = "-" if cpu is None or not base_cpu else f"{cpu / base_cpu:.2f}"
        print(f"    {n:>6,} steps {wall:10.2f} {cpu_text:>10}   x at {base}: {wall / base_wall:.2f} wall, {cpu_ratio} cpu")
    top = sizes[-1]
    if top != base:
        wall_ratio = per_step[top][0] / per_step[base][0]
        cpu_top, cpu_base = per_step[top][1], per_step[base][1]
        judged = wall_ratio if cpu_top is None or not cpu_base else cpu_top / cpu_base  # CPU: less noisy
        print(f"    per-step cost at {top:,} / at {base}: {wall_ratio:.2f} wall"
              + ("" if cpu_top is None or not cpu_base else f", {cpu_top / cpu_base:.2f} cpu")
              + f"   target <= 1.5 (on CPU where known): {'flat/linear' if judged <= 1.5 else 'WORSE than linear'}")


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
    cpu_text = f"{'-':>7}" if cpu != cpu else f"{cpu:7.3f}"  # NaN: no CPU figure (a CLI run too short to read)
    print(f"  {label:<50} {wall:7.3f} {cpu_text}   {judged}{note}".rstrip())


def bench_noop() -> Callable[..., Any]:
    """The function chainlang calls for bench.noop: the loader caches the module, so the runs
    and the baselines call this very object."""
    from chainlang.registry.loading import load_tools

    for spec in load_tools([str(TOOLS)], TOOLS.parent):
        func = getattr(spec, "func", None)
        if getattr(spec, "name", None) == EVENT and callable(func):
            return cast(Callable[..., Any], func)
    raise RuntimeError(f"{TOOLS} does not define {EVENT}")


async def main_async(args: argparse.Namespace) -> None:
    noop = bench_noop()
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    graph_sizes = sorted({int(s) for s in args.graph_sizes.split(",") if s.strip()})
    cli_sizes = sorted({int(s) for s in args.cli_sizes.split(",") if s.strip()} | {args.cli_steps})
    baseline_steps = args.baseline_steps
    branches = args.branches
    key = secrets.token_bytes(32)  # the floor's sealing key, made once as a project's is read once
    lg = None if args.cli_only else langgraph_version()
    started = time.perf_counter()

    print(f"chainlang run benchmark: Python {platform.python_version()}, langgraph {lg or '-'}, "
          f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}, best of {args.repeat} rounds")
    if lg is None and not args.cli_only:
        print(MISSING_LANGGRAPH)

    samples: dict[str, list[Sample]] = {}  # in process; every round measures each contender once, in turn,
    # so that a change in the machine's load (other processes) hits all of them alike

    def keep(key_: str, sample: Sample) -> None:
        samples.setdefault(key_, []).append(sample)

    if args.dir:  # a directory of the user's choosing: made when missing
        os.makedirs(args.dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="chainlang-bench-", dir=args.dir) as tmp_name:
        tmp = Path(tmp_name)
        counter = iter(range(1_000_000))

        def transcript() -> Path:
            return tmp / f"run{next(counter)}.jsonl"

        floor_chain = tmp / f"seq{baseline_steps}.chain.yaml"
        floor_chain.write_text(sequential_chain(baseline_steps), encoding="utf-8")
        header = run_header(floor_chain, baseline_steps)
        await asyncio_floor(noop, baseline_steps, transcript(), key, header)  # warm-up, not measured
        if args.cli_only:
            for _ in range(args.repeat):
                gc.collect()
                keep("floor", await asyncio_floor(noop, baseline_steps, transcript(), key, header))
        else:
            await in_process(args, noop, sizes, graph_sizes, tmp, transcript, key, header, lg, keep)
        cli = cli_bench(tmp, cli_sizes, args.cli_steps, args.repeat)
        for _ in range(args.repeat):  # the floor again, after the CLI runs: the best of both halves
            gc.collect()
            keep("floor", await asyncio_floor(noop, baseline_steps, transcript(), key, header))

    top = {key_: best(values) for key_, values in samples.items()}
    if not args.cli_only:
        report_in_process(samples, top, sizes, graph_sizes, baseline_steps, branches, lg)
    else:
        print()
        row("asyncio floor: render + 2 sealed lines/step", baseline_steps, top["floor"], baseline_steps)

    # issue 27's targets for steps: the CLI's per-step cost on the headline chain
    headline = cli[(args.cli_steps, False)]
    floor = top["floor"]
    cli_wall, cli_cpu = headline.run_ms * 1000 / args.cli_steps, headline.run_cpu_ms
    cli_cpu_us = None if cli_cpu is None else cli_cpu * 1000 / args.cli_steps
    floor_wall, floor_cpu = floor.wall_ms * 1000 / baseline_steps, floor.cpu_ms * 1000 / baseline_steps
    print()
    print(f"steps through the CLI (default progress to a pipe, {args.cli_steps:,} steps): issue 27's targets")
    print(f"  {'':<50} {'wall':>7} {'cpu':>7}")
    print(f"  {'chainlang CLI, µs per step':<50} {cli_wall:7.2f} "
          + (f"{cli_cpu_us:7.2f}" if cli_cpu_us is not None else f"{'-':>7}")
          + f"   target <= 25 {verdict(cli_wall, 25.0)}")
    print(f"  {f'asyncio floor, µs per step ({baseline_steps:,} steps)':<50} {floor_wall:7.2f} {floor_cpu:7.2f}")
    ratio_line("chainlang CLI / the floor per step", cli_wall / floor_wall,
               (cli_cpu_us / floor_cpu) if cli_cpu_us is not None else float("nan"), 1.5)
    graph_key = next((f"graph{n}" for n in (args.cli_steps, *reversed(graph_sizes)) if f"graph{n}" in top), None)
    if graph_key is not None:
        nodes = int(graph_key[5:])
        graph = top[graph_key]
        lg_wall, lg_cpu = graph.wall_ms * 1000 / nodes, graph.cpu_ms * 1000 / nodes
        ratio_line(f"chainlang CLI / LangGraph per node ({nodes:,} nodes)", cli_wall / lg_wall,
                   (cli_cpu_us / lg_cpu) if cli_cpu_us is not None else float("nan"), 0.15)
    if "fan_graph" in top:
        ratio_line(f"chainlang / LangGraph Send fan-out, {branches:,} branches",
                   top["fan"].wall_ms / top["fan_graph"].wall_ms, top["fan"].cpu_ms / top["fan_graph"].cpu_ms, 0.15)

    print()
    print("scaling: per-step cost (µs, wall and cpu) by chain length")
    if not args.cli_only and len(sizes) > 1:
        scaling_line("in process (run_finished's duration; cpu from the transcript's opening)",
                     {n: (top[f"chain{n}"].wall_ms * 1000 / n, top[f"chain{n}"].cpu_ms * 1000 / n) for n in sizes})
    if len(cli_sizes) > 1:
        scaling_line("through the CLI, default progress to a pipe (run's duration; run cpu between its progress lines)",
                     {n: (cli[(n, False)].run_ms * 1000 / n, per_step_or_none(cli[(n, False)].run_cpu_ms, n))
                      for n in cli_sizes})
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end; total {time.perf_counter() - started:.0f} s")


async def in_process(args: argparse.Namespace, noop: Callable[..., Any], sizes: list[int], graph_sizes: list[int],
                     tmp: Path, transcript: Callable[[], Path], key: bytes, header: dict[str, Any], lg: str | None,
                     keep: Callable[[str, Sample], None]) -> None:
    """The in-process rounds: chainlang runs of every size, the asyncio baselines, LangGraph."""
    baseline_steps, branches = args.baseline_steps, args.branches
    chains = {n: tmp / f"seq{n}.chain.yaml" for n in sizes}
    for n, path in chains.items():
        path.write_text(sequential_chain(n), encoding="utf-8")
    fan_chain = tmp / f"par{branches}.chain.yaml"
    fan_chain.write_text(parallel_chain(branches), encoding="utf-8")

    # warm-up (lazy imports, first-run caches): not measured
    warm = tmp / "warm.chain.yaml"
    warm.write_text(sequential_chain(10), encoding="utf-8")
    await chainlang_run(warm, transcript(), 10)
    await chainlang_run(fan_chain, transcript(), branches)

    for n in sizes:
        keep(f"prepare{n}", Sample(prepare_ms(chains[n]), 0.0))
    graphs: dict[int, Any] = {}
    fan_graph: Any = None
    if lg is not None:
        graphs = {n: langgraph_linear(noop, n) for n in graph_sizes}  # compile time not counted
        fan_graph = langgraph_fanout(noop, branches)

    for _ in range(args.repeat):
        for n in sizes:
            gc.collect()
            keep(f"chain{n}", await chainlang_run(chains[n], transcript(), n))
        gc.collect()
        keep("bare", await asyncio_loop(noop, baseline_steps))
        gc.collect()
        keep("jsonl", await asyncio_loop_jsonl(noop, baseline_steps, transcript()))
        gc.collect()
        keep("floor", await asyncio_floor(noop, baseline_steps, transcript(), key, header))
        for n, graph in graphs.items():
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
            sample, out = await invoke(fan_graph, {"results": []}, 25)
            assert sorted(out["results"]) == list(range(branches)), len(out["results"])
            keep("fan_graph", sample)


def report_in_process(samples: dict[str, list[Sample]], top: dict[str, Sample], sizes: list[int],
                      graph_sizes: list[int], baseline_steps: int, branches: int, lg: str | None) -> None:
    chain = {n: top[f"chain{n}"] for n in sizes}
    graph_runs = {n: top[f"graph{n}"] for n in graph_sizes if f"graph{n}" in top}

    print()
    print("sequential chain of no-op steps, each passing on the previous result (in process)")
    print(f"  {'':<40} {'steps':>6} {'µs/step':>10} {'cpu µs':>10}")
    for n in sizes:
        median = statistics.median(s.wall_ms for s in samples[f"chain{n}"]) * 1000 / n
        prep = top[f"prepare{n}"].wall_ms
        row("chainlang run (run_finished duration)", n, chain[n], n,
            f"median {median:.2f}; ts {chain[n].ts_ms:.0f} ms; prepare (once) {prep:.0f} ms "
            f"({prep * 1000 / n:.0f} µs/step) not in the run")
    row("asyncio loop, bare calls", baseline_steps, top["bare"], baseline_steps)
    row("asyncio loop, calls + 2 JSON lines/step", baseline_steps, top["jsonl"], baseline_steps,
        "unsealed, fewer fields")
    row("asyncio floor: render + 2 sealed lines/step", baseline_steps, top["floor"], baseline_steps,
        "the same records, sealed: the floor")
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
    print("ratios in process (targets are information only: this benchmark never fails)")
    print(f"  {'':<50} {'wall':>7} {'cpu':>7}")

    def ratio(a: Sample, a_n: int, b: Sample, b_n: int) -> tuple[float, float]:
        return (a.wall_ms / a_n) / (b.wall_ms / b_n), (a.cpu_ms / a_n) / (b.cpu_ms / b_n)

    if baseline_steps in chain:
        ratio_line(f"chainlang / the floor, {baseline_steps:,} steps",
                   *ratio(chain[baseline_steps], baseline_steps, top["floor"], baseline_steps), 1.5,
                   "  (interpreter overhead over the same records)")
    for n, sample in graph_runs.items():
        if n in chain:
            ratio_line(f"chainlang / LangGraph per step, {n:,} steps", *ratio(chain[n], n, sample, n), 0.15)


# --------------------------------------------------------------------------- where a step's time goes

# Phases of a step, by the module (or builtin) a function's own time is spent in; the first
# match wins. Builtins not named here (dict.get, len, isinstance...) count for their callers'
# phases, in proportion to the time each caller spent in them.
PHASES: list[tuple[str, tuple[str, ...]]] = [
    ("write (write(2), fsync)", ("posix.write", "posix.pwrite", "posix.fsync", "posix.fdatasync")),
    ("seal (MAC)", ("journal/integrity.py", "_blake2", "blake2b")),
    ("record/encode", ("journal/", "json/", "_json", "'encode' of 'str'", "builtins.round")),
    ("render (references, templates)", ("chainlang/expr/", "compile/graph.py", "runtime/scope.py",
                                        "runtime/secret_refs.py", "runtime/context.py")),
    ("validate (params, schemas)", ("chainlang/schemas/", "chainlang/checks/", "runtime/inputs.py")),
    ("call (the tool and its guard)", ("runtime/calls.py", "runtime/invoke.py", "runtime/inline.py",
                                       "runtime/watchdog.py", "runtime/tool_context.py", "bench_tools.py")),
    ("scheduling (asyncio, threads)", ("asyncio/", "selectors.py", "threading.py", "queue.py", "concurrent/",
                                       "_contextvars", "_asyncio", "select.epoll", "_thread")),
    ("step and walk (the interpreter)", ("chainlang/runtime/", "chainlang/compile/", "chainlang/model/")),
]


def phase_of(file: str, name: str) -> str | None:
    """The phase of a function (None: a builtin that counts for its callers)."""
    where = f"{file}:{name}".replace(os.sep, "/")
    for phase, marks in PHASES:
        if any(mark in where for mark in marks):
            return phase
    return None if file == "~" else "other"


def phase_table(stats: Any) -> dict[str, float]:
    """Seconds of own time by phase, from a pstats.Stats."""
    raw = stats.stats  # (file, line, name) -> (primitive calls, calls, own time, cumulative, callers)
    totals: dict[str, float] = {}

    def phase_for(key: tuple[str, int, str], depth: int = 0) -> dict[str, float]:
        """The shares of each phase in the own time of `key` (a builtin: its callers' phases)."""
        found = phase_of(key[0], key[2])
        if found is not None or depth > 3:
            return {found or "other": 1.0}
        callers = raw[key][4]
        spent = sum(edge[2] for edge in callers.values()) or 1.0
        shares: dict[str, float] = {}
        for caller, edge in callers.items():
            for phase, share in phase_for(caller, depth + 1).items():
                shares[phase] = shares.get(phase, 0.0) + share * edge[2] / spent
        return shares or {"other": 1.0}

    for key, (_, _, own, _, _) in raw.items():
        for phase, share in phase_for(key).items():
            totals[phase] = totals.get(phase, 0.0) + own * share
    return totals


async def profile_steps(args: argparse.Namespace) -> None:
    """cProfile of one run of a --cli-steps chain in process (prepared before, as
    project.chain does: loading and checking are not in it), after a warm-up run; prints
    the own time by phase and the top functions, and keeps the profile in --profile."""
    import cProfile
    import pstats

    import chainlang

    if args.dir:  # a directory of the user's choosing: made when missing
        os.makedirs(args.dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="chainlang-profile-", dir=args.dir) as tmp_name:
        root = Path(tmp_name)
        (root / "chainlang.toml").write_text("", encoding="utf-8")
        chain_file = root / "seq.chain.yaml"
        chain_file.write_text(sequential_chain(args.cli_steps), encoding="utf-8")
        project = await chainlang.open_project(root, tools=[str(TOOLS)], notify=lambda _: None)
        chain = project.chain(os.fspath(chain_file))
        if (await chain.run()).status != "ok":
            raise RuntimeError("the warm-up run did not end ok")
        profiler = cProfile.Profile()
        profiler.enable()
        result = await chain.run()
        profiler.disable()
        await project.aclose()
    if result.status != "ok":
        raise RuntimeError(f"the profiled run ended {result.status}")
    profiler.dump_stats(args.profile)
    stats = pstats.Stats(args.profile)
    totals = phase_table(stats)
    whole = sum(totals.values())
    steps = args.cli_steps
    print(f"\nwhere a step's time goes: cProfile of one {steps:,}-step run in process "
          f"(run_finished's duration {result.duration_ms:.0f} ms under the profiler)")
    print(f"  {'phase (own time)':<36} {'ms':>8} {'µs/step':>8} {'share':>6}")
    for phase, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {phase:<36} {seconds * 1000:8.1f} {seconds * 1e6 / steps:8.2f} {seconds / whole:6.1%}")
    print(f"  {'all':<36} {whole * 1000:8.1f} {whole * 1e6 / steps:8.2f}")
    print(f"\n(the profiler adds its own cost to every call: compare the shares, not the totals, with the"
          f" unprofiled figures)\nprofile kept in {args.profile}; the top functions by own time:")
    stats.sort_stats("tottime").print_stats(args.top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds; each figure is the best of them (default 5)")
    parser.add_argument("--sizes", default="20,200,2000,20000",
                        help="chain lengths run in process (default 20,200,2000,20000)")
    parser.add_argument("--graph-sizes", default="200,2000", help="LangGraph graph lengths (default 200,2000)")
    parser.add_argument("--baseline-steps", type=int, default=2000,
                        help="length of the asyncio loops, the floor among them (default 2000)")
    parser.add_argument("--branches", type=int, default=1000, help="fan-out width, 1 to 1024 (default 1000)")
    parser.add_argument("--cli-steps", type=int, default=2000,
                        help="steps of the chain whose CLI run is judged against the targets (default 2000)")
    parser.add_argument("--cli-sizes", default="20,200,2000,20000",
                        help="chain lengths run through the CLI for the scaling line (default 20,200,2000,20000)")
    parser.add_argument("--cli-only", action="store_true", help="only the CLI runs (and the floor), no LangGraph")
    parser.add_argument("--dir", default=None,
                        help="where the chains and transcripts go, in a temporary directory removed at the end "
                             "(default: the system's temporary directory; give one on the disk you mean to measure)")
    parser.add_argument("--profile", metavar="FILE", default=None,
                        help="instead of the benchmark: cProfile one --cli-steps run in process, print where its "
                             "time goes by phase and keep the profile in FILE")
    parser.add_argument("--top", type=int, default=25, help="with --profile: functions listed (default 25)")
    args = parser.parse_args()
    if not 1 <= args.branches <= 1024:
        parser.error("--branches: a parallel group runs 1 to 1024 branches at once")
    if args.repeat < 1:
        parser.error("--repeat: at least 1")
    if args.cli_steps < 1 or args.baseline_steps < 1:
        parser.error("--cli-steps, --baseline-steps: at least 1")

    # An editable checkout under PYTHONDONTWRITEBYTECODE=1 would compile every module on
    # import; compile once so the figures measure what an installed wheel runs.
    import chainlang

    compileall.compile_dir(str(Path(chainlang.__file__).parent), quiet=1)
    asyncio.run(profile_steps(args) if args.profile else main_async(args))


if __name__ == "__main__":
    main()
