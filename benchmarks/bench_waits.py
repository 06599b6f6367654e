"""Benchmark of waiting runs (LANGUAGE.md §15, issue 24; not a test: it prints figures and
never fails on noise).

Does a project holding --waits (10,000) waiting runs answer events as fast as one with none?
Two projects are made side by side (under --dir, default the system's temporary directory):
`idle`, whose store holds no wait, and `loaded`, whose store holds the waiting runs, opened
with `Store.open_wait` as runs register them. The mix of the loaded store:

  - 60 %: waits for 20 other events (`other.e00`...), keyed `ref == order.result.ref`;
  - 30 %: waits for the very event the benchmark emits, `approval.given`, keyed
    `draft_id == draft.result.id` with the run's frozen draft ids, none of which the
    benchmark's events carry (the index must skip them);
  - 10 %: `user.ask` questions (waits for `user.answered`, keyed by question_id).

Every figure is measured on both projects, in turn, in the same run: the idle one is the
baseline, the ratio is loaded / idle (target: events/s within 10 %, i.e. >= 0.90x; p99
latency <= 1.10x). Before each round, each project gets the same --events *target* waits
(keyed by fresh draft ids / question ids), which the round's events are delivered to.

  1. in process, `runtime/deliver.deliver_event` on the store directly, one event at a time:
     events that match one waiting run (approval.given for a target draft id), events that
     match none (a draft id nobody waits for: the common case of an event with hooks only),
     and answers (`check_answer` then `deliver_event` of user.answered for a target
     question). Events/s, the latency of each delivery (p50, p99; one store transaction
     each, its disk sync included) and the process CPU per event.
  2. through `chainlang serve` (one per project, both started before the loads, on
     loopback): --serve-events POSTs of /events/approval.given, --concurrency in flight, each
     for a real run detached at its wait (`bench.target`, started in this process before
     the round with `run_async(detach=True)`), which serve resumes once it delivered the
     event (the run then ends at once). The delivery latency is the moment the store settled
     the wait (`settled_at`) minus the moment its POST was sent; events/s counts until the
     last target was delivered (or, with a serve that does not deliver to waits, until the
     last answer: then only that is shown); beside it, how long until serve had resumed every
     run past its wait (the row marked finished). Serve's CPU time per event (all its
     processes, /proc, resumes included) and its resident memory (VmRSS of serve and its
     workers) after the loads: the memory 10,000 waiting runs cost is loaded - idle (target:
     under 50 MB).
  3. due tasks through each serve, idle otherwise: --tasks `once` tasks due over 2 s
     (stored as `task.schedule` stores them); the lateness of their firing (claimed by the
     scheduler, from the store) p50/p99, loaded vs idle.

Each in-process figure is the best of --rounds rounds (events/s) with the latencies of all
rounds pooled; a round measures both projects in turn, so that other load on the machine
slows both alike. Wall-clock figures move with that load (printed at the top and per
section); the CPU columns much less. Filling the loaded store is timed too (open_wait per
row: one transaction and disk sync each, as a run registering its wait pays).

Usage: python benchmarks/bench_waits.py [--quick] [--waits 10000] [--events 500] [--rounds 3]
                                        [--serve-events 150] [--concurrency 16] [--workers 2]
                                        [--tasks 50] [--dir DIR] [--no-serve]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_bench import Client, Server, _revision, children, pct, serve_argv  # noqa: E402

EVENT = "approval.given"
ANSWER = "user.answered"
OTHER_EVENTS = 20
TARGET_RATIO = 0.90  # loaded events/s at least this fraction of idle's
TARGET_P99_RATIO = 1.10
TARGET_RSS_MB = 50.0

HOOKS = f"""\
events:
  {EVENT}:
    description: An approver answered a draft.
    payload:
      type: object
      properties:
        draft_id: {{type: string}}
        approved: {{type: boolean}}
      required: [draft_id, approved]
""" + "".join(f"""\
  other.e{i:02d}:
    description: Another event runs wait for.
    payload:
      type: object
      properties:
        ref: {{type: string}}
      required: [ref]
""" for i in range(OTHER_EVENTS))


# the runs serve delivers the POSTed events to: real runs, detached at their wait; resumed by
# serve once their event is delivered, they end at once
TARGET_CHAIN = f"""\
chain: bench.target
inputs:
  draft: {{type: string}}
steps:
  - wait:
      event: {EVENT}
      where: "draft_id == inputs.draft"
      timeout: 2d
"""


def make_project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (root / "waits.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    (root / "target.chain.yaml").write_text(TARGET_CHAIN, encoding="utf-8")
    return root


# --------------------------------------------------------------------------- the waits


def _stamp(moment: datetime) -> str:
    from chainlang.runtime.wait_step import utc_stamp

    return utc_stamp(moment)


def approval_wait(run_id: str, draft_id: str, deadline: str) -> Any:
    """The row of a run waiting at its step 2 for the approval of its draft."""
    from chainlang.store.waits import WaitRow

    return WaitRow(run_id=run_id, step="2", event=EVENT, where="draft_id == draft.result.id",
                   frozen={"draft.result.id": draft_id}, deadline=deadline, transcript=f"runs/{run_id}.jsonl",
                   chain="mail.approve", engine="embedded", status="waiting", created_at="",
                   match_field="draft_id", match_value=draft_id)


def question_wait(run_id: str, deadline: str) -> Any:
    """The row of a run asking a question (user.ask) at its step 3."""
    from chainlang.runtime.wait_step import question_id
    from chainlang.store.waits import WaitRow

    qid = question_id(run_id, "3")
    question = {"id": qid, "question": f"Send the report of {run_id}?", "choices": ["yes", "no"]}
    return WaitRow(run_id=run_id, step="3", event=ANSWER, where=f"question_id == '{qid}'", frozen={},
                   deadline=deadline, transcript=f"runs/{run_id}.jsonl", chain="report.ask", engine="embedded",
                   status="waiting", created_at="", match_field="question_id", match_value=qid, question=question)


def other_wait(run_id: str, i: int, deadline: str) -> Any:
    from chainlang.store.waits import WaitRow

    ref = f"ref-{i}"
    return WaitRow(run_id=run_id, step="4", event=f"other.e{i % OTHER_EVENTS:02d}", where="ref == order.result.ref",
                   frozen={"order.result.ref": ref}, deadline=deadline, transcript=f"runs/{run_id}.jsonl",
                   chain="order.follow", engine="embedded", status="waiting", created_at="",
                   match_field="ref", match_value=ref)


def fill(root: Path, count: int) -> tuple[float, float, dict[str, int]]:
    """Open `count` waits of the mix (deadlines 1 to 30 days away): (wall s, CPU s, by kind)."""
    from chainlang.tasks.stored import project_store

    now = datetime.now(timezone.utc)
    kinds = {"other events": 0, f"{EVENT}, other keys": 0, "user.ask questions": 0}
    cpu0, t0 = time.process_time(), time.perf_counter()
    with project_store(root) as store:
        for i in range(count):
            deadline = _stamp(now + timedelta(days=1 + i % 30))
            run_id = f"bg-{i:06d}"
            slot = i % 10
            if slot < 6:
                store.open_wait(other_wait(run_id, i, deadline))
                kinds["other events"] += 1
            elif slot < 9:
                store.open_wait(approval_wait(run_id, f"draft-bg-{i}", deadline))
                kinds[f"{EVENT}, other keys"] += 1
            else:
                store.open_wait(question_wait(run_id, deadline))
                kinds["user.ask questions"] += 1
        held = store.count_waits()
    if held < count:
        raise RuntimeError(f"the loaded store holds {held} waits, not {count}")
    return time.perf_counter() - t0, time.process_time() - cpu0, kinds


def open_targets(store: Any, tag: str, n: int) -> tuple[list[str], list[str]]:
    """`n` approval waits and `n` question waits the round's events are for: (draft ids, qids)."""
    deadline = _stamp(datetime.now(timezone.utc) + timedelta(days=2))
    drafts, questions = [], []
    for i in range(n):
        run_id = f"{tag}-{i:05d}"
        drafts.append(store.open_wait(approval_wait(run_id, f"draft-{tag}-{i}", deadline)).match_value)
        questions.append(store.open_wait(question_wait(run_id, deadline)).question_id)
    return drafts, questions


# --------------------------------------------------------------------------- 1. in process


@dataclass
class Direct:
    """One kind of event delivered in process: each delivery's wall time, and the totals."""

    label: str
    latencies_ms: list[float] = field(default_factory=list)  # every round's, pooled
    rates: list[float] = field(default_factory=list)  # events/s, per round
    cpu_us: list[float] = field(default_factory=list)  # CPU per event, per round


def deliver_all(store: Any, events: list[tuple[str, dict[str, Any]]], expect: int, into: Direct, tag: str) -> None:
    from chainlang.runtime.deliver import check_answer, deliver_event

    cpu0, t0 = time.process_time(), time.perf_counter()
    for i, (name, payload) in enumerate(events):
        began = time.perf_counter()
        if name == ANSWER:
            problems = check_answer(store, payload)
            if problems:
                raise RuntimeError(f"an answer was refused: {problems[0]}")
        rows = deliver_event(store, name, payload, f"{tag}-{i}")
        into.latencies_ms.append((time.perf_counter() - began) * 1000)
        if len(rows) != expect:
            raise RuntimeError(f"{name} {payload} was delivered to {len(rows)} waits, not {expect}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    into.rates.append(len(events) / wall)
    into.cpu_us.append(cpu / len(events) * 1e6)


def direct_round(root: Path, tag: str, n: int, results: dict[str, Direct]) -> None:
    from chainlang.tasks.stored import project_store

    with project_store(root) as store:
        drafts, questions = open_targets(store, tag, n)
        deliver_all(store, [(EVENT, {"draft_id": d, "approved": True}) for d in drafts], 1,
                    results["match"], f"{tag}-m")
        deliver_all(store, [(EVENT, {"draft_id": f"nobody-{tag}-{i}", "approved": True}) for i in range(n)], 0,
                    results["none"], f"{tag}-n")
        deliver_all(store, [(ANSWER, {"question_id": q, "answer": "yes", "by": "bench"}) for q in questions], 1,
                    results["answer"], f"{tag}-a")


# --------------------------------------------------------------------------- 2. through serve


def rss_mb(pid: int) -> float:
    """Resident memory of a process and of its children (serve's workers), MB."""
    total = 0.0
    for one in [pid, *children(pid)]:
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


@dataclass
class ServeLoad:
    label: str
    n: int
    codes: dict[int, int] = field(default_factory=dict)
    answer_ms: list[float] = field(default_factory=list)  # POST sent -> answer read
    delivery_ms: list[float] = field(default_factory=list)  # POST sent -> wait settled in the store
    delivered: int = 0
    resumed: int = 0  # runs serve resumed past their wait
    resumed_s: float = 0.0  # first POST -> the last of them
    span_s: float = 0.0  # first POST -> last delivery (or last answer when none was delivered)
    server_cpu_s: float = 0.0
    load: tuple[float, float] = (0.0, 0.0)

    @property
    def rate(self) -> float:
        return self.n / self.span_s if self.span_s else 0.0


async def post_all(url: str, drafts: list[str], concurrency: int, into: ServeLoad) -> dict[str, datetime]:
    """POST one approval per draft id; when each was sent (wall clock)."""
    sent: dict[str, datetime] = {}
    todo = iter(drafts)
    async with Client("aiohttp", concurrency + 2) as http:
        async def worker() -> None:
            for draft in todo:
                body = json.dumps({"draft_id": draft, "approved": True}).encode()
                sent[draft] = datetime.now(timezone.utc)
                began = time.perf_counter()
                code, _ = await http.post(f"{url}/events/{EVENT}", body)
                into.answer_ms.append((time.perf_counter() - began) * 1000)
                into.codes[code] = into.codes.get(code, 0) + 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return sent


async def start_runs(root: Path, tag: str, n: int) -> list[tuple[str, str]]:
    """`n` runs of the target chain detached at their wait, 8 at a time: (draft id, run id) each."""
    from chainlang.runtime.runner import run_async

    slots = asyncio.Semaphore(8)

    async def one(i: int) -> tuple[str, str]:
        draft = f"draft-{tag}-{i}"
        async with slots:
            result = await run_async(root / "target.chain.yaml", {"draft": draft}, detach=True, notify=lambda _: None)
        if result.status != "waiting" or result.run_id is None:
            raise RuntimeError(f"a target run ended {result.status}, not waiting")
        return draft, result.run_id

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def serve_round(root: Path, serve: Server, tag: str, n: int, concurrency: int, expect_delivery: bool) -> ServeLoad:
    from chainlang.tasks.stored import project_store

    targets = asyncio.run(start_runs(root, tag, n))
    drafts = [draft for draft, _ in targets]
    out = ServeLoad(tag, n)
    out.load = (os.getloadavg()[0], 0.0)
    cpu0 = serve.cpu()
    first = datetime.now(timezone.utc)
    sent = asyncio.run(post_all(serve.url, drafts, concurrency, out))
    answered = datetime.now(timezone.utc)
    settled: dict[str, datetime] = {}
    # the deliveries: read from the store (a serve that delivers does it before or soon after its answer)
    deadline = time.monotonic() + (30.0 + n / 50 if expect_delivery else 2.0)
    with project_store(root) as store:
        while time.monotonic() < deadline:
            for draft, run_id in targets:
                if draft in settled:
                    continue
                row = store.get_wait(run_id, "1")
                if row is not None and row.status == "delivered" and row.settled_at:
                    settled[draft] = datetime.fromisoformat(row.settled_at)
            if len(settled) == n:
                break
            time.sleep(0.2)
    resumed: list[datetime] = []
    if settled:  # serve resumes each run past its wait (then it ends): its row is marked finished
        with project_store(root) as store:
            deadline = time.monotonic() + 60.0 + n / 5
            while time.monotonic() < deadline:
                rows = [store.get_wait(run_id, "1") for _, run_id in targets]
                resumed = [datetime.fromisoformat(r.finished_at) for r in rows if r is not None and r.finished_at]
                if len(resumed) == len(settled):
                    break
                time.sleep(0.2)
    out.resumed = len(resumed)
    out.resumed_s = (max(resumed) - first).total_seconds() if resumed else 0.0
    out.server_cpu_s = serve.cpu() - cpu0
    out.delivered = len(settled)
    out.delivery_ms = [(settled[d] - sent[d]).total_seconds() * 1000 for d in settled]
    last = max(settled.values()) if settled else answered
    out.span_s = (last - first).total_seconds()
    out.load = (out.load[0], os.getloadavg()[0])
    return out


def serve_tasks(root: Path, tag: str, count: int) -> list[float]:
    """`count` once tasks due over 2 s from 1 s from now, stored as `task.schedule` stores
    them (action tools.now): the lateness of the scheduler's claims (ms)."""
    from chainlang.schedules import parse_schedule
    from chainlang.tasks.stored import project_store

    now = datetime.now(timezone.utc)
    ids = []
    with project_store(root) as store:
        for i in range(count):
            given = {"type": "once", "at": (now + timedelta(seconds=1 + 2.0 * i / count)).isoformat()}
            timing = parse_schedule(given, now)
            definition = {"schedule": given, "misfire": "once", "action": ["tools.now"], "captured": {},
                          "timing": timing.to_json(), "description": "bench_waits"}
            ids.append(store.add_task("schedule", definition, id=f"{tag}-{i:04d}", origin="bench_waits",
                                      next_run=timing.first, status="pending").id)
    deadline = time.monotonic() + 60.0
    with project_store(root) as store:
        while time.monotonic() < deadline:
            if all(t.status not in ("pending", "active") for t in store.list_tasks(kind="schedule") if t.id in ids):
                break
            time.sleep(0.2)
        runs = [run for task_id in ids for run in store.runs(task_id)]
    return [(datetime.fromisoformat(r.started_at) - datetime.fromisoformat(r.due_at)).total_seconds() * 1000
            for r in runs]


# --------------------------------------------------------------------------- the report


def ratio(loaded: float, idle: float) -> str:
    return f"{loaded / idle:5.2f}x" if idle and idle == idle and loaded == loaded else "  n/a"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def direct_report(results: dict[str, dict[str, Direct]]) -> None:
    print(f"   {'':44} {'events/s':>9} {'(median)':>9} {'p50 ms':>8} {'p99 ms':>8} {'CPU us/ev':>9}"
          f"   loaded/idle: rate   p99")
    for kind in ("match", "none", "answer"):
        idle, loaded = results["idle"][kind], results["loaded"][kind]
        for which, got in (("idle", idle), ("loaded", loaded)):
            line = (f"   {got.label + ', ' + which:44} {max(got.rates):9,.0f} {statistics.median(got.rates):9,.0f}"
                    f" {pct(got.latencies_ms, 50):8.2f} {pct(got.latencies_ms, 99):8.2f} {min(got.cpu_us):9,.0f}")
            if which == "loaded":
                rate_ratio = max(loaded.rates) / max(idle.rates)
                p99_ratio = pct(loaded.latencies_ms, 99) / pct(idle.latencies_ms, 99)
                line += (f"   {rate_ratio:5.2f}x {p99_ratio:5.2f}x  [rate >= {TARGET_RATIO:.2f}x: "
                         f"{verdict(rate_ratio >= TARGET_RATIO)}; p99 <= {TARGET_P99_RATIO:.2f}x: "
                         f"{verdict(p99_ratio <= TARGET_P99_RATIO)}]")
            print(line)


def serve_report(loads: dict[str, list[ServeLoad]], rss: dict[str, tuple[float, float]]) -> None:
    delivering = any(one.delivered for runs in loads.values() for one in runs)
    print(f"   {'':10} {'events/s':>9} {'answer p50':>10} {'p99 ms':>8} {'delivery p50':>12} {'p99 ms':>8}"
          f" {'delivered':>10} {'srv CPU us/ev':>13} {'resumed':>9} {'runs/s':>7}  load")
    best: dict[str, ServeLoad] = {}
    for which in ("idle", "loaded"):
        runs = loads[which]
        top = max(runs, key=lambda r: r.rate)
        best[which] = top
        answers = [ms for r in runs for ms in r.answer_ms]
        deliveries = [ms for r in runs for ms in r.delivery_ms]
        codes: dict[int, int] = {}
        for r in runs:
            for code, k in r.codes.items():
                codes[code] = codes.get(code, 0) + k
        odd = {c: k for c, k in codes.items() if c not in (200, 202)}
        print(f"   {which:10} {top.rate:9,.0f} {pct(answers, 50):10.1f} {pct(answers, 99):8.1f}"
              f" {pct(deliveries, 50):12.1f} {pct(deliveries, 99):8.1f}"
              f" {sum(r.delivered for r in runs):>5}/{sum(r.n for r in runs):<4}"
              f" {min(r.server_cpu_s / r.n * 1e6 for r in runs):13,.0f}"
              f" {sum(r.resumed for r in runs):>4}/{sum(r.n for r in runs):<4}"
              f" {max(r.resumed / r.resumed_s if r.resumed_s else 0.0 for r in runs):7,.0f}"
              f"  {top.load[0]:.2f}->{top.load[1]:.2f}" + (f"  !! answers {odd}" if odd else ""))
    if not delivering:
        print("   (this serve does not deliver POSTed events to waiting runs: events/s counts until the last "
              "answer, and there is no delivery latency)")
    idle_p99 = pct([ms for r in loads["idle"] for ms in (r.delivery_ms or r.answer_ms)], 99)
    loaded_p99 = pct([ms for r in loads["loaded"] for ms in (r.delivery_ms or r.answer_ms)], 99)
    rate_ratio = best["loaded"].rate / best["idle"].rate if best["idle"].rate else float("nan")
    what = "delivery" if delivering else "answer"
    print(f"   loaded/idle: events/s {rate_ratio:.2f}x [>= {TARGET_RATIO:.2f}x: {verdict(rate_ratio >= TARGET_RATIO)}],"
          f" p99 {what} {ratio(loaded_p99, idle_p99)} [<= {TARGET_P99_RATIO:.2f}x: "
          f"{verdict(loaded_p99 / idle_p99 <= TARGET_P99_RATIO if idle_p99 else False)}]")
    for which in ("idle", "loaded"):
        before, after = rss[which]
        print(f"   serve's resident memory, {which:6}: {before:6.1f} MB after start, {after:6.1f} MB after the loads")
    delta = rss["loaded"][1] - rss["idle"][1]
    print(f"   memory the waiting runs cost serve (loaded - idle, after the loads): {delta:+.1f} MB "
          f"[< {TARGET_RSS_MB:.0f} MB: {verdict(delta < TARGET_RSS_MB)}]")


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1,000 waits, 100 events, 1 round")
    parser.add_argument("--waits", type=int, default=None, help="waiting runs of the loaded store (default 10,000)")
    parser.add_argument("--events", type=int, default=None, help="events of each kind per round in process (500)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 3)")
    parser.add_argument("--serve-events", type=int, default=None, help="POSTs per serve round (default 150)")
    parser.add_argument("--concurrency", type=int, default=16, help="POSTs in flight (default 16)")
    parser.add_argument("--workers", type=int, default=2, help="serve --workers (default 2)")
    parser.add_argument("--tasks", type=int, default=None, help="due tasks per serve (default 50)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to make the projects (default: the system's temporary directory)")
    parser.add_argument("--no-serve", action="store_true", help="only the in-process figures")
    args = parser.parse_args()
    waits = args.waits if args.waits is not None else (1_000 if args.quick else 10_000)
    n = args.events or (100 if args.quick else 500)
    rounds = args.rounds or (1 if args.quick else 3)
    serve_n = args.serve_events or (40 if args.quick else 150)
    tasks = args.tasks or (10 if args.quick else 50)
    load = os.getloadavg()
    print(f"waits benchmark — Python {sys.version.split()[0]}, {os.cpu_count()} cores, load {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f}; {waits:,} waiting runs vs none; chainlang at {_revision()}")
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    if args.dir:  # a directory of the user's choosing: made when missing
        os.makedirs(args.dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-waits-", dir=args.dir) as tmp:
        base = Path(tmp)
        roots = {"idle": make_project(base / "idle"), "loaded": make_project(base / "loaded")}
        print(f"   projects in {base}")
        from chainlang.tasks.stored import project_store

        with project_store(roots["idle"]):  # both stores created (migrations run) before anything is timed
            pass
        wall, cpu, kinds = fill(roots["loaded"], waits)
        print(f"   filled the loaded store: {waits:,} open_wait in {wall:.1f} s ({wall / max(1, waits) * 1e3:.2f} ms "
              f"each, CPU {cpu / max(1, waits) * 1e3:.2f} ms): " + ", ".join(f"{k:,} {v}" for v, k in kinds.items()))

        # 1. in process
        results = {which: {"match": Direct(f"{EVENT}, 1 run waits for it"),
                           "none": Direct(f"{EVENT}, no run waits for it"),
                           "answer": Direct(f"{ANSWER} (checked), 1 question")} for which in roots}
        direct_round(roots["idle"], "warm-idle", 20, {k: Direct(k) for k in ("match", "none", "answer")})
        direct_round(roots["loaded"], "warm-loaded", 20, {k: Direct(k) for k in ("match", "none", "answer")})
        load1 = os.getloadavg()[0]
        for r in range(rounds):
            for which in (("idle", "loaded") if r % 2 == 0 else ("loaded", "idle")):
                direct_round(roots[which], f"r{r}-{which}", n, results[which])
        print(f"\n1. delivery in process (runtime/deliver.deliver_event on the store), {n} events of each kind per "
              f"round, {rounds} round(s); load {load1:.2f}->{os.getloadavg()[0]:.2f}")
        direct_report(results)

        if args.no_serve:
            return 0
        # 2 + 3. through serve
        serves: dict[str, Server] = {}
        rss: dict[str, tuple[float, float]] = {}
        loads: dict[str, list[ServeLoad]] = {"idle": [], "loaded": []}
        late: dict[str, list[float]] = {}
        try:
            for which, root in roots.items():
                serves[which] = Server(serve_argv(None, base, args.workers), root, base / f"serve-{which}.log",
                                       f"chainlang serve ({which})")
            for which, serve in serves.items():  # warm: imports, the first event
                serve_round(roots[which], serve, f"sw-{which}", 20, 4, expect_delivery=False)
            delivering = any(r.delivered for r in (serve_round(roots[w], s, f"sw2-{w}", 20, 4, False)
                                                   for w, s in serves.items()))
            for which, serve in serves.items():
                rss[which] = (rss_mb(serve.pid), 0.0)
            for r in range(rounds):
                for which in (("idle", "loaded") if r % 2 == 0 else ("loaded", "idle")):
                    loads[which].append(serve_round(roots[which], serves[which], f"s{r}-{which}", serve_n,
                                                    args.concurrency, delivering))
            for which, serve in serves.items():
                rss[which] = (rss[which][0], rss_mb(serve.pid))
            for which in roots:
                late[which] = serve_tasks(roots[which], f"t-{which}", tasks)
        finally:
            for which, serve in serves.items():
                code = serve.stop()
                if code != 0:
                    print(f"   (serve {which} exited {code}; its log: "
                          f"{(base / f'serve-{which}.log').read_text(errors='replace')[-1500:]})")
        print(f"\n2. through chainlang serve --workers {args.workers}: {serve_n:,} POSTs of {EVENT} per round, "
              f"{args.concurrency} in flight, each for a waiting run; {rounds} round(s)")
        serve_report(loads, rss)
        print(f"\n3. due tasks through each serve (otherwise idle): {tasks} once tasks due over 2 s; lateness of the "
              f"scheduler's claim (ms)")
        for which in ("idle", "loaded"):
            ms = late[which]
            print(f"   {which:8} p50 {pct(ms, 50):7.1f}  p99 {pct(ms, 99):7.1f}  max {max(ms) if ms else float('nan'):7.1f}"
                  f"  fired {len(ms)}/{tasks}")
        print(f"   loaded/idle p99: {ratio(pct(late['loaded'], 99), pct(late['idle'], 99))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
