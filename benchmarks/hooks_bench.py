"""Benchmark of hook dispatch (not a test: it prints figures and never fails on noise).

Measured in one process, each figure next to a baseline measured in the same run:
  1. dispatch: the hooks of an event found and their conditions evaluated, for a project
     of --hooks (10,000) hooks, with none of them on the event, and with one of them on it
     (its condition evaluated, and true). Baseline: the same answer found by a scan of every
     hook (what dispatch without the trigger index costs). Target: >= 100,000 events/s with
     none matching. Reported warm (the event seen before) and cold (a new event name each
     time, so the globs are matched again).
  2. per-step overhead: a sequential chain of --steps (2,000) no-op steps run with
     `chainlang.run_async`, once alone and once in a project with --step-hooks (2,000)
     hooks on other events. Target: within 1.2x of the chain without hooks.
  3. compiling: checking and compiling the --hooks hooks of the project (once).

Each figure is the best of --repeat rounds; wall-clock time is shown beside the process CPU
time of the same work, which other load on the machine disturbs much less.

Usage: python benchmarks/hooks_bench.py [--hooks 10000] [--steps 2000] [--step-hooks 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_bench import EVENT, Sample, Timer, best, chainlang_run, sequential_chain  # noqa: E402

TARGET_RATE = 100_000  # events per second with no hook matching
TARGET_STEP_RATIO = 1.2


def hooks_file(hooks: int, target_hooks: int, events: int = 100) -> str:
    """A hooks file (block YAML, as people write them): `events` declared external events,
    `hooks` hooks spread over them (a tenth on globs), and `target_hooks` hooks on
    `bench.target` (condition true for the payload)."""
    payload = "{type: object, properties: {n: {type: integer}}, required: [n]}"
    lines = ["events:"]
    for name in [f"bench.e{i}" for i in range(events)] + ["bench.target"]:
        lines += [f"  {name}:", "    description: bench", f"    payload: {payload}"]
    lines.append("hooks:")
    for i in range(hooks):
        if i < hooks - target_hooks:
            key, trigger = f"h{i}", f"post:bench.e{i % events}" if i % 10 else f"post:bench.e{i % events}*"
        else:
            key, trigger = f"target{i}", "post:bench.target"
        lines += [f"  - id: {key}", f"    trigger: {trigger}", "    condition: n > 5", "    action:",
                  '      - user.notify: {message: "{n}"}']
    return "\n".join(lines) + "\n"


def load_hooks(directory: Path) -> tuple[Any, float, float]:
    """The project's compiled HookSet, and the time to check and compile it (wall, CPU ms)."""
    from chainlang.runtime.emit import load_project

    with Timer() as timer:
        project = load_project(directory)
    if project.hooks is None:
        raise RuntimeError(f"the generated hooks do not check: {project.diagnostics[:3]}")
    return project.hooks, timer.sample.wall_ms, timer.sample.cpu_ms


def dispatcher(hooks: Any) -> Any:
    """What firing does before any action starts: the matching hooks, their conditions."""
    from chainlang.expr.values import truthy
    from chainlang.runtime.scope import Binder, HookContext, Scope

    binders: dict[int, Binder] = {}

    def dispatch(name: str, payload: dict[str, Any]) -> list[Any]:
        out = []
        for hook in hooks.matching("post", name):
            binder = binders.get(id(hook.bindings)) or binders.setdefault(id(hook.bindings), Binder(hook.bindings))
            scope = Scope(binder, {}, {}, hook=HookContext(payload, {"name": name, "payload": payload}))
            if hook.condition is None or truthy(hook.condition(scope)):
                out.append(hook)
        return out

    return dispatch


def scanner(hooks: Any) -> Any:
    """The baseline: every hook's trigger compared with the event, each time."""
    everything = hooks.hooks

    def scan(name: str, payload: dict[str, Any]) -> list[Any]:
        return [h for h in everything if h.phase == "post" and (h.pattern == name or (h.glob and fnmatchcase(name, h.pattern)))]

    return scan


def rate(fn: Any, names: list[str], payload: dict[str, Any], expect: int) -> Sample:
    with Timer() as timer:
        for name in names:
            found = fn(name, payload)
    if len(found) != expect:
        raise RuntimeError(f"dispatch found {len(found)} hooks, expected {expect}")
    return timer.sample


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hooks", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=2_000)
    parser.add_argument("--step-hooks", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"hooks benchmark — Python {sys.version.split()[0]}, {os.cpu_count()} cores, load {load[0]:.2f} {load[1]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        none_dir, one_dir = root / "none", root / "one"
        for d, target in ((none_dir, 0), (one_dir, 1)):
            d.mkdir()
            (d / "chainlang.toml").write_text("", encoding="utf-8")
            (d / "bench.hooks.yaml").write_text(hooks_file(args.hooks, target), encoding="utf-8")
        none_set, compile_wall, compile_cpu = load_hooks(none_dir)
        one_set, _, _ = load_hooks(one_dir)
        print(f"\n1. dispatch with {args.hooks:,} hooks in force (check + compile of the hooks: "
              f"{compile_wall:,.0f} ms wall, {compile_cpu:,.0f} ms CPU)")
        n = 200_000
        payload = {"n": 7}
        warm = ["bench.target"] * n
        cold_n = 2_000
        for label, hooks, expect in (("none matching", none_set, 0), ("1 matching", one_set, 1)):
            fast, slow = dispatcher(hooks), scanner(hooks)
            fast("bench.target", payload)  # the event seen once: the index answer is memoised
            runs = [rate(fast, warm, payload, expect) for _ in range(args.repeat)]
            scans = [rate(slow, ["bench.target"] * 200, payload, expect) for _ in range(args.repeat)]
            got, base = best(runs), best(scans)
            per_s, base_per_s = n / got.wall_ms * 1000, 200 / base.wall_ms * 1000
            mark = "PASS" if expect or per_s >= TARGET_RATE else "MISS"
            target = f"  [target >= {TARGET_RATE:,}/s: {mark}]" if not expect else ""
            print(f"   {label:14} indexed  {per_s:>12,.0f} events/s  ({got.wall_ms / n * 1e6:,.0f} ns wall, "
                  f"{got.cpu_ms / n * 1e6:,.0f} ns CPU each){target}")
            print(f"   {'':14} scan     {base_per_s:>12,.0f} events/s  ({base.wall_ms / 200 * 1e6:,.0f} ns each)"
                  f"   ratio indexed/scan: {per_s / base_per_s:,.0f}x")
            # cold: a new event name each time (none has hooks): the globs are matched once per name
            from chainlang.compile.hooks import HookSet

            fresh = HookSet(hooks.hooks)
            names = [f"bench.cold{i}" for i in range(cold_n)]
            cold = rate(dispatcher(fresh), names, payload, 0)
            print(f"   {'':14} cold     {cold_n / cold.wall_ms * 1000:>12,.0f} events/s  (a new event name "
                  f"each time: {cold.wall_ms / cold_n * 1000:,.0f} us)")

        print(f"\n2. per step: a {args.steps:,}-step chain, without hooks and with {args.step_hooks:,} hooks on "
              "other events")
        plain_dir, hooked_dir = root / "plain", root / "hooked"
        for d in (plain_dir, hooked_dir):
            d.mkdir()
            (d / "chainlang.toml").write_text("", encoding="utf-8")
            (d / "seq.chain.yaml").write_text(sequential_chain(args.steps), encoding="utf-8")
        (hooked_dir / "bench.hooks.yaml").write_text(hooks_file(args.step_hooks, 0), encoding="utf-8")
        plain_runs: list[Sample] = []
        hooked_runs: list[Sample] = []
        for _ in range(args.repeat):  # alternate, so that load on the machine hits both alike
            plain_runs.append(asyncio.run(chainlang_run(plain_dir / "seq.chain.yaml", plain_dir / "t.jsonl", args.steps)))
            hooked_runs.append(asyncio.run(chainlang_run(hooked_dir / "seq.chain.yaml", hooked_dir / "t.jsonl",
                                                         args.steps)))
        plain, hooked = best(plain_runs), best(hooked_runs)
        ratio, cpu_ratio = hooked.wall_ms / plain.wall_ms, hooked.cpu_ms / plain.cpu_ms
        mark = "PASS" if ratio <= TARGET_STEP_RATIO else "MISS"
        for label, s in (("no hooks", plain), (f"{args.step_hooks:,} hooks", hooked)):
            print(f"   {label:12} {s.wall_ms / args.steps * 1000:6.1f} us/step wall  "
                  f"{s.cpu_ms / args.steps * 1000:6.1f} us/step CPU  ({s.wall_ms:,.0f} ms for {args.steps:,} {EVENT})")
        print(f"   ratio with/without hooks: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU  "
              f"[target <= {TARGET_STEP_RATIO}x: {mark}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
