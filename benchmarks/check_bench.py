"""Benchmark of `chainlang check` (not a test: it prints figures and never fails on noise).

Measured in one run, against baselines measured in the same run:
  1. checking a generated 1,000-step chain (~125 KB, with references, conditions and
     parallel groups) vs merely loading that file with ruamel.yaml's round-trip loader
     (target: check takes at most half of that load);
  2. cold `chainlang --help` (target <= 150 ms) vs a bare `python -c pass`;
  3. cold `chainlang check` of a small file (target <= 300 ms).

Usage: python benchmarks/check_bench.py [--steps 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def generate_chain(steps: int) -> str:
    """A realistic large chain: sequential steps with references, conditions and parallel groups."""
    lines = ["chainlang: 1", "chain: bench.big", "inputs:", "  who: {type: string, default: team}", "steps:",
             "  - tools.now", "  - memory.search: {query: start}", "  - task.list"]
    for i in range(3, steps):
        kind = i % 8
        if kind == 0:
            lines += [
                "  - - event: memory.search",
                f"      params: {{query: \"topic {i} for {{inputs.who}}\", scope: recent}}",
                "    - user.notify:",
                f"        message: \"tick {i} at {{tools.now.time}}\"",
            ]
        elif kind == 1:
            lines += [
                f"  - if: \"{{tools.now.hour}} > {i % 24} and tools.now.weekday != 'Sunday'\"",
                "    event: user.notify",
                "    params:",
                f"      message: \"step {i}: {{tools.now.weekday | upper}}\"",
            ]
        elif kind == 2:
            lines += [
                "  - event: tools.date_calc",
                f"    id: d{i}",
                "    params:",
                "      from: \"{tools.now.result}\"",
                f"      add: \"{i % 30 + 1} days\"",
            ]
        elif kind == 3:
            lines += [
                "  - user.notify:",
                f"      message: \"due {{d{i - 1}.result}} for {{inputs.who}}\"" if i > 8 else
                "      message: \"for {inputs.who}\"",
            ]
        elif kind == 4:
            lines += [
                f"  - if: \"memory.search.matches | length > {i % 5}\"",
                "    then:",
                f"      - user.notify: {{message: \"{{memory.search.matches | length}} matches at {i}\"}}",
                "    else:",
                "      - memory.append: {thread_id: bench, content: \"nothing found\"}",
            ]
        elif kind == 5:
            lines += [
                f"  - id: loop{i}",
                "    foreach: \"[1, 2, 3]\"",
                "    as: n",
                "    event: user.notify",
                f"    params: {{message: \"item {{n}} of step {i}\"}}",
            ]
        elif kind == 6:
            lines += [
                "  - parallel:",
                "      - memory.search: {query: alpha, scope: all}",
                "      - task.list: {status: pending}",
                "    max_parallel: 2",
            ]
        else:
            lines += [
                "  - event: memory.append",
                "    params:",
                "      thread_id: bench",
                f"      content: \"step {i}: {{task.list.tasks | length}} tasks\"",
                "    retry: {attempts: 3, delay: 1s}",
            ]
    lines += ["outputs:", "  last: \"{tools.now.iso}\""]
    return "\n".join(lines) + "\n"


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def cold(cmd: list[str], repeat: int) -> float:
    env = dict(os.environ, NO_COLOR="1")
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import ruamel.yaml

    from chainlang.api import check_files, default_registry

    text = generate_chain(args.steps)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.chain.yaml"
        path.write_text(text, encoding="utf-8")
        small = Path(tmp) / "small.chain.yaml"
        small.write_text("steps:\n  - tools.now\n  - user.notify: {message: \"It is {tools.now.time}\"}\n", encoding="utf-8")

        registry = default_registry()
        result = check_files([str(path)], registry=registry)
        errors = [d for d in result.diagnostics if d.severity == "error"]
        print(f"generated chain: {args.steps} steps, {len(text) / 1024:.0f} KB, {len(result.diagnostics)} diagnostics ({len(errors)} errors)")
        for d in errors[:5]:
            print("   ", d)

        def rt_load() -> None:
            ruamel.yaml.YAML().load(text)

        def check() -> None:
            check_files([str(path)], registry=registry)

        load_s = best_of(rt_load, args.repeat)
        check_s = best_of(check, args.repeat)
        print(f"ruamel.yaml round-trip load      {load_s * 1000:8.1f} ms   (baseline)")
        print(f"chainlang check (warm process)   {check_s * 1000:8.1f} ms   ratio {check_s / load_s:.2f}x of the load (target <= 0.50)")

        # An installed wheel ships byte-compiled modules (pip compiles them); an editable
        # checkout under PYTHONDONTWRITEBYTECODE=1 would recompile every module on every
        # cold start. Compile once so the cold figures measure what users run.
        import compileall

        import chainlang

        compileall.compile_dir(str(Path(chainlang.__file__).parent), quiet=1)
        exe = [sys.executable, "-m", "chainlang.cli"]
        python_s = cold([sys.executable, "-c", "pass"], args.repeat)
        help_s = cold(exe + ["--help"], args.repeat)
        small_s = cold(exe + ["check", str(small)], args.repeat)
        big_s = cold(exe + ["check", str(path)], args.repeat)
        print(f"python -c pass (cold)            {python_s * 1000:8.1f} ms   (baseline)")
        print(f"chainlang --help (cold)          {help_s * 1000:8.1f} ms   {help_s / python_s:.1f}x python start (target <= 150 ms)")
        print(f"chainlang check small (cold)     {small_s * 1000:8.1f} ms   {small_s / python_s:.1f}x python start (target <= 300 ms)")
        print(f"chainlang check 1,000 (cold)     {big_s * 1000:8.1f} ms   {big_s / load_s:.2f}x the round-trip load")


if __name__ == "__main__":
    main()
