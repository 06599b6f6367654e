"""Benchmark of the Python API on a one-step chain (not a test: it prints figures and never fails on noise).

One script, one process, every contender measured in the same rounds (a round runs each once, in
turn, so that other load on the machine slows them alike), for a one-step chain whose step calls
a SYNC tool (chainlang runs it in a worker thread) and for one whose step calls an ASYNC tool:

  a) the tool itself, called directly (`fn(value)` or `await fn(value)`): the floor;
  b) LangGraph: a compiled one-node StateGraph whose node calls the same tool, `await graph.ainvoke(...)`
     (compiled once, not counted);
  c) chainlang one-shot: `await chainlang.run_async(path, inputs, tools=[...])`, which reads the
     project, checks the chain and opens its store again at every call;
  d) chainlang loaded: `project = await chainlang.open_project(...)` and `chain = project.chain(...)`
     once, then `await chain.run(inputs)` per run (each run writes its transcript file);
  e) as d) with the project's transcripts in memory (`transcripts="memory"`), when this version of
     chainlang has them (otherwise skipped, with the reason).

Per contender: median and p95 wall time per run, median CPU time per run (time.process_time:
every thread of the process, so a tool's worker thread counts), and the ratios of the medians to
LangGraph and to the tool. Then the loop stall: a heartbeat task (an `asyncio.sleep(0)` loop)
beside each chainlang contender reports, for each run, the longest time the event loop was kept
from it in one stretch; the worst run and the median run are shown (target for d: at most 1 ms). The issue's targets: d) at most
1.5x LangGraph's median, and no stall over 1 ms.

The project is a directory with a chainlang.toml, the two chain files and nothing else, made under
/var/tmp (or --dir); the tools are this script's own functions, given as objects (`tools=[...]`).
LangGraph is optional (pip install -e '.[bench]'); without it its column is skipped.

Usage: python benchmarks/api_bench.py [--runs 300] [--warmup 30] [--dir DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, TypedDict

import chainlang

MISSING_LANGGRAPH = "langgraph not installed: pip install -e '.[bench]'"
STALL_TARGET_MS = 1.0
LANGGRAPH_TARGET = 1.5


# --------------------------------------------------------------------------- the tools (given as objects)


def bench_echo(value: int) -> int:
    """A sync tool: chainlang calls it in a worker thread (event `bench.echo`)."""
    return value


async def bench_aecho(value: int) -> int:
    """An async tool: chainlang awaits it on the loop (event `bench.aecho`)."""
    return value


TOOLS: list[Any] = [bench_echo, bench_aecho]
KINDS = {"sync": "bench.echo", "async": "bench.aecho"}  # the event each chain's one step calls


def chain_text(kind: str) -> str:
    event = KINDS[kind]
    return (f"chainlang: 1\nchain: bench.one_{kind}\ninputs:\n  n: {{type: integer}}\nsteps:\n"
            f"  - {event}: {{value: \"{{inputs.n}}\"}}\noutputs:\n  value: \"{{{event}.result}}\"\n")


def make_project(where: Path) -> dict[str, Path]:
    where.mkdir(parents=True, exist_ok=True)
    (where / "chainlang.toml").write_text('chains = ["chains"]\n', encoding="utf-8")
    (where / "chains").mkdir(exist_ok=True)
    files = {}
    for kind in KINDS:
        files[kind] = where / "chains" / f"one_{kind}.chain.yaml"
        files[kind].write_text(chain_text(kind), encoding="utf-8")
    return files


# --------------------------------------------------------------------------- contenders


Call = Callable[[int], Awaitable[Any]]


@dataclass
class Contender:
    key: str
    label: str
    call: Call | None
    skipped: str | None = None
    check: Callable[[Any, int], None] | None = None  # raises when a run did not do its work
    wall_us: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    stall_ms: float | None = None  # the longest stall of any run
    stall_median_ms: float | None = None  # the median of each run's longest stall
    stall_runs: int = 0


class State(TypedDict):
    value: int


def langgraph_version() -> str | None:
    try:
        from importlib.metadata import version

        import langgraph.graph  # noqa: F401

        return version("langgraph")
    except Exception:  # not installed, or broken: its column is skipped, with the reason
        return None


def langgraph_one_node(kind: str) -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(State)
    if kind == "sync":
        def node(state: State) -> dict[str, Any]:  # a sync node: LangGraph runs it in an executor, as chainlang does
            return {"value": bench_echo(state["value"])}

        graph.add_node("echo", node)
    else:
        async def anode(state: State) -> dict[str, Any]:
            return {"value": await bench_aecho(state["value"])}

        graph.add_node("echo", anode)
    graph.add_edge(START, "echo")
    graph.add_edge("echo", END)
    return graph.compile()


def expect_ok(result: Any, n: int) -> None:
    if result.status != "ok" or result.outputs != {"value": n}:
        raise SystemExit(f"a run did not end ok with its output: {result.status} {result.outputs} {result.error}")


def expect_value(result: Any, n: int) -> None:
    got = result["value"] if isinstance(result, dict) else result
    if got != n:
        raise SystemExit(f"a baseline returned {got!r}, not {n}")


async def memory_contender(kind: str, root: Path, chain_file: Path) -> tuple[Any, Contender]:
    """e): the loaded project with transcripts in memory, if this chainlang has them. It counts as
    there only when a run ends with no transcript file written."""
    label = f"{kind}: chainlang loaded, transcripts in memory"
    try:
        project = await chainlang.open_project(root, tools=TOOLS, transcripts="memory")
        chain = project.chain(os.fspath(chain_file))
        before = set((root / ".chainlang").rglob("*.jsonl")) | set(root.rglob("memory/*.jsonl"))
        probe = await chain.run({"n": 1})
        after = set((root / ".chainlang").rglob("*.jsonl")) | set(root.rglob("memory/*.jsonl"))
    except Exception as exc:  # an older chainlang refuses the value: say so
        return None, Contender("memory", label, None, skipped=f"transcripts='memory' not available ({exc})")
    written = probe.transcript is not None and Path(probe.transcript).exists()
    if written or after - before:
        await project.aclose()
        if (root / "memory").is_dir():
            shutil.rmtree(root / "memory")
        return None, Contender("memory", label, None,
                               skipped="no in-memory journal in this chainlang: transcripts='memory' wrote a file")

    async def call(n: int) -> Any:
        return await chain.run({"n": n})

    return project, Contender("memory", label, call, check=expect_ok)


async def contenders(kind: str, root: Path, chain_file: Path) -> tuple[list[Contender], list[Any]]:
    found: list[Contender] = []
    projects: list[Any] = []

    if kind == "sync":
        async def direct(n: int) -> Any:
            return bench_echo(n)
    else:
        async def direct(n: int) -> Any:
            return await bench_aecho(n)
    found.append(Contender("tool", f"{kind}: the tool, called directly", direct, check=expect_value))

    if langgraph_version() is None:
        found.append(Contender("langgraph", f"{kind}: LangGraph ainvoke, 1 node", None, skipped=MISSING_LANGGRAPH))
    else:
        graph = langgraph_one_node(kind)

        async def lg(n: int) -> Any:
            return await graph.ainvoke({"value": n})

        found.append(Contender("langgraph", f"{kind}: LangGraph ainvoke, 1 node", lg, check=expect_value))

    async def oneshot(n: int) -> Any:
        return await chainlang.run_async(chain_file, {"n": n}, tools=TOOLS)

    found.append(Contender("oneshot", f"{kind}: chainlang.run_async (one-shot)", oneshot, check=expect_ok))

    project = await chainlang.open_project(root, tools=TOOLS)
    projects.append(project)
    chain = project.chain(f"bench.one_{kind}")

    async def loaded(n: int) -> Any:
        return await chain.run({"n": n})

    found.append(Contender("loaded", f"{kind}: chainlang loaded, chain.run", loaded, check=expect_ok))

    memory_project, memory = await memory_contender(kind, root, chain_file)
    if memory_project is not None:
        projects.append(memory_project)
    found.append(memory)
    return found, projects


# --------------------------------------------------------------------------- measuring


async def timed_rounds(group: list[Contender], runs: int, warmup: int) -> None:
    live = [c for c in group if c.call is not None]
    for i in range(warmup):
        for c in live:
            assert c.call is not None and c.check is not None
            c.check(await c.call(i), i)
    gc.collect()
    for i in range(runs):
        for c in live:
            assert c.call is not None
            wall, cpu = time.perf_counter(), time.process_time()
            result = await c.call(i)
            c.wall_us.append((time.perf_counter() - wall) * 1e6)
            c.cpu_us.append((time.process_time() - cpu) * 1e6)
            assert c.check is not None
            c.check(result, i)


async def stall(contender: Contender, runs: int) -> None:
    """The longest stretch the loop spent away from a heartbeat task during each of `runs` runs:
    the longest any other task of the application (a request handler, say) would have waited.
    Kept per run: the worst run, and the median run's worst."""
    assert contender.call is not None
    done = False
    longest = 0.0

    async def heartbeat() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)
    per_run: list[float] = []
    try:
        for i in range(runs):
            longest = 0.0
            await contender.call(i)
            await asyncio.sleep(0)  # the heartbeat's gap that ends after the run's last step counts too
            per_run.append(longest * 1000)
    finally:
        done = True
        await beat
    contender.stall_ms = max(per_run)
    contender.stall_median_ms = statistics.median(per_run)
    contender.stall_runs = runs


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def figures(c: Contender, floor: Contender | None, lg: Contender | None) -> dict[str, Any]:
    if c.call is None:
        return {"label": c.label, "skipped": c.skipped}
    wall, cpu = statistics.median(c.wall_us), statistics.median(c.cpu_us)
    out: dict[str, Any] = {"label": c.label, "runs": len(c.wall_us), "wall_median_us": round(wall, 1),
                           "wall_p95_us": round(p95(c.wall_us), 1), "cpu_median_us": round(cpu, 1)}
    if lg is not None and lg.call is not None and lg.wall_us:
        out["x_langgraph"] = round(wall / statistics.median(lg.wall_us), 2)
        out["x_langgraph_cpu"] = round(cpu / statistics.median(lg.cpu_us), 2)
    if floor is not None and floor.wall_us:
        out["x_tool"] = round(wall / statistics.median(floor.wall_us), 1)
    if c.stall_ms is not None:
        out["max_loop_stall_ms"] = round(c.stall_ms, 3)
        out["median_run_max_stall_ms"] = round(c.stall_median_ms or 0.0, 3)
        out["stall_runs"] = c.stall_runs
    return out


def show(rows: list[dict[str, Any]]) -> None:
    head = f"{'':46} {'median µs':>10} {'p95 µs':>9} {'CPU µs':>8} {'x LangGraph':>12} {'x tool':>8} {'stall ms: max':>14} {'median':>7}"
    print(head)
    for r in rows:
        if "skipped" in r:
            print(f"{r['label']:46} skipped: {r['skipped']}")
            continue
        lg = f"{r['x_langgraph']:.2f}" if "x_langgraph" in r else "-"
        tool = f"{r['x_tool']:.1f}" if "x_tool" in r else "-"
        st = f"{r['max_loop_stall_ms']:.3f}" if "max_loop_stall_ms" in r else "-"
        sm = f"{r['median_run_max_stall_ms']:.3f}" if "median_run_max_stall_ms" in r else "-"
        print(f"{r['label']:46} {r['wall_median_us']:>10.1f} {r['wall_p95_us']:>9.1f} {r['cpu_median_us']:>8.1f} "
              f"{lg:>12} {tool:>8} {st:>14} {sm:>7}")


def verdicts(rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for kind in KINDS:
        loaded = rows.get(f"{kind}.loaded", {})
        if "x_langgraph" in loaded:
            x = loaded["x_langgraph"]
            lines.append(f"{kind}: loaded chain.run at {x:.2f}x LangGraph (target <= {LANGGRAPH_TARGET}x): "
                         f"{'PASS' if x <= LANGGRAPH_TARGET else 'MISS'}")
        if "max_loop_stall_ms" in loaded:
            s = loaded["max_loop_stall_ms"]
            m = loaded["median_run_max_stall_ms"]
            lines.append(f"{kind}: loaded chain.run longest loop stall {s:.3f} ms in the worst run, {m:.3f} ms in "
                         f"the median run (target <= {STALL_TARGET_MS} ms per run): "
                         f"{'PASS' if s <= STALL_TARGET_MS else 'MISS'}")
    return lines


async def main_async(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    files = make_project(root)
    all_rows: dict[str, dict[str, Any]] = {}
    printed: list[dict[str, Any]] = []
    projects: list[Any] = []
    try:
        for kind, chain_file in files.items():
            group, opened = await contenders(kind, root, chain_file)
            projects += opened
            await timed_rounds(group, args.runs, args.warmup)
            for c in group:
                if c.key in ("oneshot", "loaded", "memory") and c.call is not None:
                    await stall(c, args.stall_runs)
            by_key = {c.key: c for c in group}
            for c in group:
                row = figures(c, by_key.get("tool"), by_key.get("langgraph"))
                all_rows[f"{kind}.{c.key}"] = row
                printed.append(row)
    finally:
        for project in projects:
            await project.aclose()
    show(printed)
    lines = verdicts(all_rows)
    for line in lines:
        print(line)
    return {"rows": all_rows, "verdicts": lines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="timed runs of each contender (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed runs first (default 30)")
    parser.add_argument("--stall-runs", type=int, default=100, help="runs beside the heartbeat (default 100)")
    parser.add_argument("--dir", type=Path, help="the project directory (kept); default a new one under /var/tmp, "
                                                 "removed at the end")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()

    if args.dir is not None:
        root = args.dir.resolve()
    else:
        parent = "/var/tmp" if os.path.isdir("/var/tmp") else None  # not /tmp: often a small tmpfs
        root = Path(tempfile.mkdtemp(prefix="chainlang-api-bench-", dir=parent))
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    print(f"chainlang API benchmark: python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, langgraph {langgraph_version() or '(not installed)'}")
    print(f"project directory: {root}{'' if args.dir else ' (removed at the end; --dir DIR keeps one)'}")
    print(f"{args.runs} timed runs per contender after {args.warmup} untimed, in turn; "
          f"loop stall over {args.stall_runs} runs beside an asyncio.sleep(0) heartbeat\n")
    try:
        report = asyncio.run(main_async(args, root))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    if args.json is not None:
        report.update({"python": platform.python_version(), "cpus": os.cpu_count(), "load": list(load),
                       "langgraph": langgraph_version(), "runs": args.runs, "project": str(root)})
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
