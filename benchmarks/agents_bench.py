"""Benchmark of the agent events' own cost (not a test: it prints figures and never fails on noise).

The model is the scripted provider, which answers at once, so what is measured is chainlang's
part of a model-written chain: asking (prompt rendered in the sandbox, the call budgeted and
recorded as a model_call), reading the answer, building the chain document, loading, checking
and compiling it, and running its steps. Measured in one process, each figure next to a
baseline measured in the same run:

  1. agent.chain: a chain of --calls (50) `agent.chain` steps, each writing and running a chain
     of 3 steps. Baseline: the same 50 x 3 steps run by `chain.run` from a file (checked once,
     then cached). The ratio is the price of a chain that exists only as a model's answer
     (checked anew each time).
  2. agent.think: --calls `agent.think` steps on a thread of 30 events (its prompt renders the
     thread and the event list). Baseline: as many `tools.now` steps.

Each figure is the best of --repeat rounds; wall-clock time is shown beside the process CPU time.

Usage: python benchmarks/agents_bench.py [--calls 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_bench import Sample, Timer, best  # noqa: E402

SUB = ["tools.now", {"tools.date_calc": {"from": "{tools.now.date}", "add": "1 day"}},
       {"user.notify": {"message": "tomorrow is {tools.date_calc.result}"}}]
RULES = {"rules": [
    {"task": "think", "answer": {"event": "agent.reply", "params": {"message": "all done"}}},
    {"task": "chain", "answer": {"chain": SUB}},
]}


def project(root: Path, calls: int) -> None:
    (root / "chainlang.toml").write_text('[models.fast]\nprovider = "scripted"\nrules = "answers.yaml"\n',
                                         encoding="utf-8")
    (root / "answers.yaml").write_text(json.dumps(RULES), encoding="utf-8")
    (root / "sub.chain.yaml").write_text(json.dumps({"chainlang": 1, "steps": SUB}), encoding="utf-8")
    limits = {"max_steps": 100_000}
    written = [{"agent.chain": {"plan": f"plan {i}"}} for i in range(calls)]
    from_file = [{"chain.run": {"path": "sub.chain.yaml"}} for _ in range(calls)]
    think = [{"agent.think": {"thread_id": "t1"}} for _ in range(calls)]
    now = ["tools.now" for _ in range(calls)]
    for name, steps in (("written", written), ("file", from_file), ("think", think), ("now", now)):
        (root / f"{name}.chain.yaml").write_text(json.dumps({"chainlang": 1, "limits": limits, "steps": steps}),
                                                 encoding="utf-8")


def thread(root: Path) -> None:
    from chainlang.tasks.stored import project_store

    with project_store(root) as store:
        store.create_thread("t1", summary="planning the Q2 launch with marketing and engineering")
        for i in range(30):
            store.add_event("t1", "memory.search", {"matches": [f"note {i} about the launch budget"]}, "r", str(i))


def timed(root: Path, name: str, repeat: int) -> Sample:
    import chainlang

    samples = []
    for n in range(repeat):
        with Timer() as timer:
            result = asyncio.run(chainlang.run_async(root / f"{name}.chain.yaml",
                                                     transcript=root / f"{name}-{n}.jsonl",
                                                     notify=lambda text: None))
        assert result.status == "ok", (name, result.error)
        samples.append(timer.sample)
    return best(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project(root, args.calls)
        thread(root)
        figures = {name: timed(root, name, args.repeat) for name in ("written", "file", "think", "now")}
    per = {name: (s.wall_ms / args.calls, s.cpu_ms / args.calls) for name, s in figures.items()}
    print(f"agents_bench: {args.calls} steps a chain, best of {args.repeat} (wall ms / CPU ms per step)")
    for label, name, base in (("agent.chain (3-step chain written, checked, run)", "written", "file"),
                              ("agent.think (thread of 30 events)", "think", "now")):
        (wall, cpu), (bwall, bcpu) = per[name], per[base]
        print(f"  {label:52} {wall:7.2f} / {cpu:7.2f}   baseline {base:5} {bwall:6.2f} / {bcpu:6.2f}"
              f"   ratio {wall / bwall:5.1f}x wall, {cpu / bcpu:5.1f}x CPU")


if __name__ == "__main__":
    main()
