"""Benchmark of `chainlang serve` (not a test: it prints figures and never fails on noise).

Everything goes through a real `chainlang serve` on loopback: a subprocess started in a
temporary project whose hooks file declares the external event `bench.ping` and one hook
on it whose action is `tools.now` (a trivial step).

  1. events through serve: --events (2,000) POSTed to /events/bench.ping by an async client
     in this process with --concurrency (32) requests in flight, in two modes: 202 (each
     event accepted and recorded; /metrics is then polled until `chainlang_events_total`
     counts every one of them, i.e. their hooks have finished) and ?wait=1 (each answered
     once its hooks are done). The figure is events whose hooks finished per second
     (target: >= 2,000/s on 2 cores, and >= 0.25x the aiohttp hello world of 3). Beside it: serve's CPU time (utime + stime of
     /proc/PID/stat, all its threads), the client's CPU time and the load average before
     and after. Then the scaling line: 202 loads of --scale-events (500) at 1, 32 and 128
     requests in flight (events/s should stay flat or rise with the concurrency, never drop).
  2. lateness of due tasks: before each load, --tasks (100) `once` tasks are added to the
     project's store (as `task.schedule` stores them: action `tools.now`), due at even
     intervals over the load's expected span. Each firing's lateness is read twice: from the
     store (`task_runs`: started_at - due_at, the moment the scheduler claimed it, which is
     what the histogram `chainlang_task_lateness_seconds` of /metrics observes) and from its
     transcript (the `ts` of its action's `step_started` - due_at: when the action really
     began; millisecond resolution). p50/p95/p99/max in ms, under each load and idle (as
     many tasks at the same spacing, no events): the baseline. Target: p99 <= 100 ms.
  3. baselines in the same run: the hooks fired in this process by
     `chainlang.runtime.emit.fire` with a loaded project, as serve's engine calls it (no
     HTTP, no store), one event at a time and --concurrency at a time, then with each event
     claimed and finished in the store through serve's ledger (the claims and ends of one
     moment in one transaction, in its thread; no HTTP); the public
     `emit_async`, which loads the project for each event; and an aiohttp hello-world server
     in a subprocess (reads the body, answers 202 with a small JSON object), driven by each
     client at the same concurrency: the most HTTP this stack allows on this machine.
     The first row, fire() one at a time, is a one-step emit in process: its CPU per event
     is checked against the target of 0.3 ms.

The load's client is aiohttp's (`--client httpx` for httpx's): on this kind of machine
httpx's AsyncClient costs milliseconds of CPU per request and tops out at a few hundred
requests/s even against the hello world (its connection pool scans every connection for
each request), so it cannot drive serve at the target rate; the baselines show both.
The client shares the machine's cores with serve: its CPU time is shown.

Wall-clock figures move with other load on the machine (the load average is printed next
to each); serve's CPU time per event is the steadier figure.

--profile FILE runs one more 202 load with serve under cProfile, every thread profiled (the
event loop and the threads running the store's calls and the tools), with each thread's
CPU time as the clock, and prints the top functions by cumulative and by own time (FILE:
the merged stats, for `python -m pstats FILE`). The profiler slows serve several times.

The project (and so every transcript it writes) lies in a temporary directory under --dir
(default: the system's temporary directory). Where creating files is slow (some container
/tmp file systems cost 20-40x a plain disk per file), give a directory on a real disk: serve
creates a transcript and its head file per event.

Usage: python benchmarks/serve_bench.py [--quick] [--events 2000] [--concurrency 32] [--tasks 100]
                                        [--scale-events 500] [--dir DIR]
                                        [--client aiohttp|httpx] [--profile FILE] [--top 25]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

TARGET_RATE = 2_000  # events whose hooks finished, per second, on 2 cores
TARGET_HELLO = 0.25  # ... and at least this fraction of the aiohttp hello world's rate
TARGET_EMIT_CPU_US = 300.0  # CPU of a one-step emit in process (fire(), one at a time)
SCALE_INFLIGHT = (1, 32, 128)  # the scaling line: requests in flight
TARGET_P99_MS = 100.0  # lateness of a due task under that load
EVENT = "bench.ping"

HOOKS = f"""\
events:
  {EVENT}:
    description: A benchmark event.
    payload:
      type: object
      properties:
        n: {{type: integer}}
      required: [n]
hooks:
  - id: on-ping
    trigger: post:{EVENT}
    action:
      - tools.now
"""

HELLO = """\
import asyncio, json
from aiohttp import web

async def handle(request):
    await request.read()
    return web.Response(text=json.dumps({"status": "accepted", "event": request.match_info["name"]}),
                        content_type="application/json", status=202)

async def main():
    app = web.Application()
    app.router.add_post("/events/{name}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"serving on http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""

# serve under cProfile, every thread with its own profiler whose clock is that thread's CPU
# time, merged into one stats file when serve stops. A thread still running then (an idle
# worker) has its profiler stopped from the main thread: its open frames (the idle wait)
# are closed on its own clock, so they are timed right. SIGUSR1 clears every profiler: the
# benchmark sends it after the warm-up, so that the stats are those of the load alone.
PROFILED = """\
import cProfile, functools, pstats, signal, sys, threading, time
out = sys.argv[1]
profilers = []
plain_run = threading.Thread.run


def profiler():
    clock = time.pthread_getcpuclockid(threading.get_ident())
    return cProfile.Profile(functools.partial(time.clock_gettime, clock))


def run(self):
    p = profiler()
    profilers.append(p)
    p.enable()
    try:
        plain_run(self)
    finally:
        p.disable()


def reset(signum, frame):
    main_profiler.clear()
    for p in profilers:
        p.clear()


threading.Thread.run = run
signal.signal(signal.SIGUSR1, reset)
main_profiler = profiler()
sys.argv = ["chainlang"] + sys.argv[2:]
from chainlang.cli.main import main
main_profiler.enable()
try:
    main(prog_name="chainlang")
finally:
    main_profiler.disable()
    stats = pstats.Stats(main_profiler)
    for p in profilers:
        stats.add(p)
    stats.dump_stats(out)
    print(f"profile: {len(profilers) + 1} thread(s) merged", file=sys.stderr)
"""


# --------------------------------------------------------------------------- processes


def proc_cpu(pid: int) -> float:
    """user + system CPU seconds of process `pid` (all its threads), from /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            if int(text[text.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(entry.name))
    return found


class Server:
    """A server subprocess that prints its URL on stdout when it listens."""

    def __init__(self, argv: list[str], cwd: Path, log: Path, what: str) -> None:
        self.what = what
        self.log = log
        self._err = log.open("w", encoding="utf-8")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=self._err, text=True, env=env)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.url = self._wait_url(120.0)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _wait_url(self, timeout: float) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            if "http://" in line:
                return "http://" + line.split("http://", 1)[1].split()[0]
        self.proc.kill()
        raise RuntimeError(f"{self.what} did not start: {self.log.read_text(errors='replace')[-2000:]}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu(self) -> float:
        """The CPU of the process and of its children (the workers of serve --workers)."""
        return proc_cpu(self.proc.pid) + sum(proc_cpu(pid) for pid in children(self.proc.pid))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()
        return self.proc.returncode


def serve_argv(profile: Path | None, script_dir: Path, workers: int = 1) -> list[str]:
    args = ["serve", "--host", "127.0.0.1", "--port", "0", "--grace", "30s", "--workers", str(workers)]
    if profile is None:
        return [sys.executable, "-m", "chainlang.cli", *args]
    wrapper = script_dir / "profiled_serve.py"
    wrapper.write_text(PROFILED, encoding="utf-8")
    return [sys.executable, str(wrapper), str(profile), *args]


def make_project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "chainlang.toml").write_text("", encoding="utf-8")
    (root / "bench.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    return root


# --------------------------------------------------------------------------- the load


@dataclass
class Load:
    label: str
    n: int
    answered_s: float = 0.0  # until the last response
    done_s: float = 0.0  # until every event's hooks had finished
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    codes: Counter[int] = field(default_factory=Counter)
    answers: Counter[str] = field(default_factory=Counter)  # the answers' `status`
    statuses: dict[str, float] = field(default_factory=dict)  # chainlang_events_total by status, this load
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    finished: bool = True
    window: tuple[datetime, datetime] | None = None  # wall clock, to tell the firings under load

    @property
    def rate(self) -> float:
        return self.n / self.done_s if self.done_s else 0.0


def events_by_status(text: str) -> dict[str, float]:
    """chainlang_events_total of /metrics, by status."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("chainlang_events_total{"):
            labels, value = line.rsplit(" ", 1)
            status = labels.split('status="', 1)[1].split('"', 1)[0]
            out[status] = out.get(status, 0.0) + float(value)
    return out


class Client:
    """The load's HTTP client: aiohttp's (the default) or httpx's, with `limit` connections."""

    def __init__(self, kind: str, limit: int) -> None:
        self.kind, self.limit = kind, limit

    async def __aenter__(self) -> Client:
        if self.kind == "httpx":
            import httpx

            limits = httpx.Limits(max_connections=self.limit, max_keepalive_connections=self.limit)
            self._httpx = httpx.AsyncClient(limits=limits, timeout=300.0)
        else:
            import aiohttp

            self._aiohttp = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self.limit),
                                                  timeout=aiohttp.ClientTimeout(total=300.0))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.kind == "httpx":
            await self._httpx.aclose()
        else:
            await self._aiohttp.close()

    async def post(self, url: str, body: bytes) -> tuple[int, str]:
        """The status code and the answer's `status` (accepted, ok, duplicate...)."""
        headers = {"Content-Type": "application/json"}
        if self.kind == "httpx":
            got = await self._httpx.post(url, content=body, headers=headers)
            code, text = int(got.status_code), got.content
        else:
            async with self._aiohttp.post(url, data=body, headers=headers) as reply:
                code, text = reply.status, await reply.read()
        try:
            answer = json.loads(text)
        except ValueError:
            return code, "not JSON"
        return code, str(answer.get("status", "?")) if isinstance(answer, dict) else "?"

    async def text(self, url: str) -> str:
        if self.kind == "httpx":
            reply = await self._httpx.get(url)
            reply.raise_for_status()
            return str(reply.text)
        async with self._aiohttp.get(url) as got:
            got.raise_for_status()
            return await got.text()


async def drive(url: str, n: int, concurrency: int, *, wait: bool, label: str, server_cpu: Callable[[], float],
                poll: bool, first: int = 0, client: str = "aiohttp") -> Load:
    """POST `n` events, `concurrency` in flight; with `poll`, then wait (polling /metrics)
    until chainlang_events_total has counted all of them."""
    load = Load(label, n)
    path = f"{url}/events/{EVENT}" + ("?wait=1" if wait else "")
    async with Client(client, concurrency + 2) as http:
        before = events_by_status(await http.text(f"{url}/metrics")) if poll else {}
        todo = iter(range(first, first + n))

        async def worker() -> None:
            for i in todo:
                code, status = await http.post(path, json.dumps({"n": i}).encode())
                load.codes[code] += 1
                load.answers[status] += 1

        load.load_before = os.getloadavg()
        began_at = datetime.now(timezone.utc)
        cpu0, srv0, t0 = time.process_time(), server_cpu(), time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        load.answered_s = time.perf_counter() - t0
        if poll:
            deadline = time.perf_counter() + 30.0 + n / 100
            while True:
                now = events_by_status(await http.text(f"{url}/metrics"))
                counted = {k: v - before.get(k, 0.0) for k, v in now.items()}
                if sum(counted.values()) >= n:
                    break
                if time.perf_counter() > deadline:
                    load.finished = False
                    break
                await asyncio.sleep(0.02)
            load.statuses = {k: v for k, v in counted.items() if v}
        load.done_s = time.perf_counter() - t0
        load.client_cpu_s = time.process_time() - cpu0
        load.server_cpu_s = server_cpu() - srv0
        load.window = (began_at, datetime.now(timezone.utc))
        load.load_after = os.getloadavg()
    return load


# --------------------------------------------------------------------------- tasks


def schedule_tasks(root: Path, prefix: str, first: datetime, span: float, count: int) -> list[str]:
    """`count` once tasks due from `first`, evenly over `span` seconds, stored as
    `task.schedule` stores them (action: tools.now)."""
    from chainlang.tasks.stored import project_store
    from chainlang.schedules import parse_schedule

    now = datetime.now(timezone.utc)
    ids = []
    with project_store(root) as store:
        for i in range(count):
            due = first + timedelta(seconds=span * i / max(1, count))
            given = {"type": "once", "at": due.isoformat()}
            timing = parse_schedule(given, now)
            task_id = f"{prefix}-{i:04d}"
            definition = {"schedule": given, "misfire": "once", "action": ["tools.now"], "captured": {},
                          "timing": timing.to_json(), "description": "serve_bench"}
            store.add_task("schedule", definition, id=task_id, origin="serve_bench", next_run=timing.first)
            ids.append(task_id)
    return ids


@dataclass
class Lateness:
    claimed_ms: list[float]  # task_runs.started_at - due_at
    began_ms: list[float]  # the action's step_started ts - due_at (ms resolution)
    fired: int
    expected: int
    failed: int


def wait_fired(root: Path, ids: list[str], timeout: float, until: datetime | None = None) -> Lateness:
    """Wait until every task has a finished run (or `timeout` s); read their lateness.
    `until`: count only the firings due before it (those due after the load ended are left out)."""
    from chainlang.tasks.stored import project_store

    deadline = time.monotonic() + timeout
    wanted = set(ids)
    with project_store(root) as store:
        while time.monotonic() < deadline:
            left = [t for t in store.list_tasks(kind="schedule") if t.id in wanted and t.status in ("pending", "active")]
            if not left:
                break
            time.sleep(0.1)
        runs = [run for task_id in ids for run in store.runs(task_id)]
    claimed, began, failed = [], [], 0
    if until is not None:
        runs = [run for run in runs if datetime.fromisoformat(run.due_at) <= until]
    for run in runs:
        due = datetime.fromisoformat(run.due_at)
        claimed.append((datetime.fromisoformat(run.started_at) - due).total_seconds() * 1000)
        if run.status != "ok":
            failed += 1
        step = _first(Path(run.transcript), "step_started")
        if step is not None:
            began.append((datetime.fromisoformat(str(step["ts"])) - due).total_seconds() * 1000)
    return Lateness(claimed, began, len(runs), len(ids), failed)


def _first(path: Path, kind: str) -> dict[str, Any] | None:
    try:
        with path.open(encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                if rec.get("type") == kind:
                    return rec  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None
    return None


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def lateness_row(label: str, ms: list[float]) -> str:
    if not ms:
        return f"   {label:34} (no firings)"
    return (f"   {label:34} {pct(ms, 50):8.1f} {pct(ms, 95):8.1f} {pct(ms, 99):8.1f} {max(ms):8.1f}"
            f" {statistics.fmean(ms):8.1f}  n={len(ms)}")


# --------------------------------------------------------------------------- in-process baselines


async def fire_in_process(root: Path, n: int, concurrency: int, with_store: bool, runs: Path) -> tuple[float, float]:
    """`n` emits of bench.ping fired in this process as serve's engine fires them (a loaded
    project, `fire`), `concurrency` at a time; with_store: claimed and finished in the
    store around each through serve's ledger (the claims and ends of one moment share one
    transaction, in its thread), as serve does. Returns (wall s, CPU s)."""
    from chainlang.runtime.admission import new_run_id, project_key, run_secrets, take_lock
    from chainlang.runtime.embedded import EMBEDDED
    from chainlang.runtime.emit import fire, load_project
    from chainlang.runtime.engine import FireJob
    from chainlang.serve.ledger import Ledger
    from chainlang.tasks.stored import project_store

    project = load_project(root)
    if project.hooks is None:
        raise RuntimeError(f"the bench project does not check: {project.diagnostics[:3]}")
    runs.mkdir(parents=True, exist_ok=True)
    store = project_store(root) if with_store else None
    ledger = Ledger(store) if store is not None else None
    key = project_key(root, create=True)
    secrets = run_secrets(project.config)
    todo = iter(range(n))
    statuses: Counter[str] = Counter()

    async def one(i: int) -> None:
        run_id = f"{new_run_id()}-{i}"
        where = runs / f"{run_id}.jsonl"
        claim_key = f"bench:{run_id}"
        if ledger is not None:
            await ledger.claim(claim_key, EVENT, run_id, str(where), {"n": i})
        header: dict[str, Any] = {"chain": None, "file": str(root), "file_sha256": project.digest, "inputs": {}, "now": None,
                  "started_at": datetime.now().astimezone().isoformat(), "tools": [], "resumed": False,
                  "emit": {"event": EVENT, "data": {"n": i}, "id": claim_key}}
        lock = take_lock(where)
        try:
            result = await fire(EMBEDDED, FireJob(project, run_id, header), where, key, lock, secrets,
                                notify=lambda _: None)
        finally:
            lock.release()
        statuses[result.status] += 1
        if ledger is not None:
            await ledger.finish(claim_key, result.status)

    async def worker() -> None:
        for i in todo:
            await one(i)

    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if store is not None:
        store.close()
    if statuses.get("ok", 0) != n:
        raise RuntimeError(f"in-process emits ended {dict(statuses)}")
    return wall, cpu


async def emit_api(root: Path, n: int) -> tuple[float, float]:
    """`n` calls of the public `emit_async` (it loads the project each time), one at a time."""
    from chainlang.engine.entry import emit_async

    cpu0, t0 = time.process_time(), time.perf_counter()
    for i in range(n):
        result = await emit_async(EVENT, {"n": i}, project=root, notify=lambda _: None)
        if result.status != "ok":
            raise RuntimeError(f"emit_async ended {result.status}: {result.error or result.errors}")
    return time.perf_counter() - t0, time.process_time() - cpu0


# --------------------------------------------------------------------------- report


def fmt_load(load: Load, base: float | None = None) -> str:
    bad = {code: k for code, k in load.codes.items() if code not in (200, 202)}
    odd = {k: v for k, v in load.answers.items() if k not in ("accepted", "ok")}
    statuses = {k: int(v) for k, v in load.statuses.items() if k != "ok"}
    note = ""
    if bad or odd or statuses or not load.finished:
        note = (f"  !! {'unfinished: ' if not load.finished else ''}codes {dict(load.codes)}, answers "
                f"{dict(load.answers)}, events_total by status {dict(load.statuses)}")
    ratio = f" {load.rate / base:6.2f}x" if base else "        "
    return (f"   {load.label:28} {load.rate:9,.0f}/s{ratio} {load.answered_s:7.2f} {load.done_s:7.2f}"
            f" {load.server_cpu_s:7.2f} {load.server_cpu_s / load.n * 1e6:7.0f} {load.client_cpu_s:7.2f}"
            f"   {load.load_before[0]:4.2f}->{load.load_after[0]:4.2f}{note}")


LOAD_HEADER = (f"   {'':28} {'events/s':>11} {'':7} {'answer':>7} {'done':>7} {'srv CPU':>7} {'us/ev':>7}"
               f" {'cli CPU':>7}   load avg\n"
               f"   {'':28} {'':11} {'':7} {'s':>7} {'s':>7} {'s':>7} {'srv':>7} {'s':>7}")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS (below target)"


# frames that only carry the others (the CLI, the event loop, thread start-up): left out of
# the cumulative list, where they would fill the top with 100%
_PLUMBING = ("click/core.py", "chainlang/cli/commands_servers.py", "asyncio/base_events.py", "asyncio/events.py", "threading.py",
             "concurrent/futures/thread.py", "profiled_serve.py", "<method 'run' of '_contextvars.Context' objects>",
             "run_loop")


def print_profile(path: Path, top: int) -> None:
    import pstats

    stats = pstats.Stats(str(path))
    rows = [(tt, ct, nc, f"{file}:{line}({name})" if line else name)
            for (file, line, name), (_, nc, tt, ct, _) in stats.stats.items()]  # type: ignore[attr-defined]
    total = sum(tt for tt, *_ in rows)
    root = str(Path(__file__).resolve().parent.parent) + "/"
    stdlib = sysconfig.get_paths()["stdlib"] + "/"
    for key, title in ((1, "cumulative time, plumbing frames left out"), (0, "own time")):
        print(f"\n   top {top} by {title} (CPU s of all threads; {total:.2f} s in all)")
        print(f"   {'calls':>9} {'own s':>8} {'cum s':>8} {'cum %':>6}  function")
        shown = 0
        for tt, ct, nc, where in sorted(rows, key=lambda r: r[key], reverse=True):
            if key == 1 and any(p in where for p in _PLUMBING):
                continue
            short = where.replace(root, "").split("site-packages/")[-1].replace(stdlib, "")
            print(f"   {nc:9,} {tt:8.3f} {ct:8.3f} {ct / total * 100:5.1f}%  {short[:120]}")
            shown += 1
            if shown >= top:
                break


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200 events, 20 tasks, small baselines")
    parser.add_argument("--events", type=int, default=None, help="events per load (default 2,000; --quick 200)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    parser.add_argument("--workers", type=int, default=2,
                        help="serve --workers (default 2: one per core of the 2-core target)")
    parser.add_argument("--tasks", type=int, default=None, help="due tasks per lateness phase (default 100; --quick 20)")
    parser.add_argument("--profile", type=Path, default=None, metavar="FILE",
                        help="also profile serve under a 202 load; write the merged cProfile stats to FILE")
    parser.add_argument("--top", type=int, default=25, help="functions listed per profile ordering")
    parser.add_argument("--scale-events", type=int, default=None,
                        help="events per point of the scaling line (default 500; --quick 100)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the temporary project goes (default: the system's temporary directory)")
    parser.add_argument("--client", choices=("aiohttp", "httpx"), default="aiohttp",
                        help="the load's HTTP client (default aiohttp; httpx is far slower, see the baselines)")
    args = parser.parse_args()
    n = args.events or (200 if args.quick else 2_000)
    k = args.tasks or (20 if args.quick else 100)
    c = args.concurrency
    load = os.getloadavg()
    print(f"serve benchmark — Python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {n:,} events, {c} in flight ({args.client} client), "
          f"{k} tasks per phase{' (quick)' if args.quick else ''}; chainlang at {_revision()}")
    m = args.scale_events or (100 if args.quick else 500)
    if args.dir:  # a directory of the user's choosing: made when missing
        os.makedirs(args.dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="serve-bench-", dir=args.dir) as tmp:
        base = Path(tmp)
        root = make_project(base / "project")

        # 3a. in-process baselines (before serve starts: nothing else runs meanwhile)
        inproc_n = max(100, n // 2)
        asyncio.run(fire_in_process(root, 20, 1, False, base / "warm"))  # imports, first compile
        seq = asyncio.run(fire_in_process(root, inproc_n, 1, False, base / "seq"))
        par = asyncio.run(fire_in_process(root, inproc_n, c, False, base / "par"))
        stored = asyncio.run(fire_in_process(root, inproc_n, c, True, base / "stored"))
        api_n = 20 if args.quick else 50
        api = asyncio.run(emit_api(root, api_n))

        # 3b. an aiohttp hello world, driven by each client (httpx with fewer requests: it is slow)
        hello = Server([sys.executable, "-c", HELLO], base, base / "hello.log", "the hello-world server")
        hellos: dict[str, Load] = {}
        try:
            for kind, count in (("aiohttp", n), ("httpx", min(n, 500))):
                asyncio.run(drive(hello.url, 100, c, wait=False, label="warm", server_cpu=hello.cpu, poll=False,
                                  client=kind))
                got = asyncio.run(drive(hello.url, count, c, wait=False, label=f"hello world, {kind} client",
                                        server_cpu=hello.cpu, poll=False, client=kind))
                got.done_s = got.answered_s
                hellos[kind] = got
        finally:
            hello.stop()
        hello_load = hellos[args.client]

        # 1 + 2. serve
        serve = Server(serve_argv(None, base, args.workers), root, base / "serve.log", "chainlang serve")
        loads: list[Load] = []
        late: dict[str, Lateness] = {}
        try:
            warm = asyncio.run(drive(serve.url, 100, c, wait=True, label="warm", server_cpu=serve.cpu, poll=False,
                                    client=args.client))
            if warm.codes.get(200, 0) != 100:
                raise RuntimeError(f"serve's warm-up answered {dict(warm.codes)}; see {serve.log}")
            # a first estimate of the load's span, to spread the tasks over it
            probe = asyncio.run(drive(serve.url, min(n, 200), c, wait=True, label="probe", server_cpu=serve.cpu,
                                      poll=False, client=args.client))
            span = max(1.0, 0.8 * n / max(1.0, probe.rate))
            lead = 1.0  # the first task is due this long after it is stored: the scheduler polls every 0.5 s

            # idle: the same tasks at the same spacing, no events
            first = datetime.now(timezone.utc) + timedelta(seconds=lead)
            ids = schedule_tasks(root, "idle", first, span, k)
            time.sleep(lead + span)
            late["idle"] = wait_fired(root, ids, 60.0 + span)

            for wait, label in ((False, "202 (accepted, then done)"), (True, "?wait=1 (hooks done)")):
                tag = "wait" if wait else "accepted"
                first = datetime.now(timezone.utc) + timedelta(seconds=lead)
                ids = schedule_tasks(root, tag, first + timedelta(seconds=0.2), span, k)
                time.sleep(max(0.0, (first - datetime.now(timezone.utc)).total_seconds()))
                loads.append(asyncio.run(drive(serve.url, n, c, wait=wait, label=label, server_cpu=serve.cpu,
                                               poll=True, first=len(loads) * n, client=args.client)))
                window = loads[-1].window
                late[tag] = wait_fired(root, ids, 60.0 + span, until=window[1] if window else None)
            # the scaling line: the same 202 load at each concurrency, one after the other
            scaling = [asyncio.run(drive(serve.url, m, inflight, wait=False, label=f"{inflight} in flight",
                                         server_cpu=serve.cpu, poll=True, first=(3 + i) * n, client=args.client))
                       for i, inflight in enumerate(SCALE_INFLIGHT)]
            metrics = asyncio.run(_final_metrics(serve.url))
        finally:
            code = serve.stop()
        if code != 0:
            print(f"   (serve exited {code}; its log: {(base / 'serve.log').read_text(errors='replace')[-1500:]})")

        profile_load = None
        if args.profile is not None:
            out = args.profile.resolve()
            out.unlink(missing_ok=True)
            profiled = Server(serve_argv(out, base), root, base / "profiled.log", "chainlang serve (profiled)")
            try:
                asyncio.run(drive(profiled.url, 100, c, wait=True, label="warm", server_cpu=profiled.cpu, poll=False,
                                  client=args.client))
                profiled.proc.send_signal(signal.SIGUSR1)  # the stats start here
                time.sleep(0.2)
                profile_load = asyncio.run(drive(profiled.url, n, c, wait=False, label="202 under cProfile",
                                                 server_cpu=profiled.cpu, poll=True, first=10 * n,
                                                 client=args.client))
            finally:
                profiled.stop(signal.SIGINT)

        # ------------------------------------------------------------------ the report
        print(f"\n1. events through serve: {n:,} POSTs of {EVENT} (hook action: tools.now), {c} in flight")
        print(LOAD_HEADER)
        best_rate = max(load.rate for load in loads)
        for one in loads:
            print(fmt_load(one, hello_load.rate))
        for kind, got in hellos.items():
            print(fmt_load(got))
        print("   (x: ratio to the hello-world's rate; answer: until the last response; done: until the hooks of "
              "every event had finished;\n    srv CPU: serve's user+system CPU over 'done'; us/ev: serve's CPU per "
              "event; cli CPU: the load client's, this process)")
        for one in loads:
            enough = one.rate >= TARGET_RATE and one.rate >= TARGET_HELLO * hello_load.rate
            print(f"   {one.label:28} [target >= {TARGET_RATE:,}/s on 2 cores and >= {TARGET_HELLO}x the hello world: "
                  f"{verdict(enough)}]")
        print(f"\n   scaling: {m:,} POSTs (202) at each concurrency")
        print(LOAD_HEADER)
        for one in scaling:
            print(fmt_load(one, hello_load.rate))
        steady = all(later.rate >= 0.9 * earlier.rate for earlier, later in zip(scaling, scaling[1:]))
        print(f"   [events/s flat or rising with the requests in flight (each >= 0.9x the one before): "
              f"{'PASS' if steady else 'MISS (it drops)'}]")

        print(f"\n2. lateness of due tasks (ms; {k} once tasks per phase, due every {span / k * 1000:.0f} ms over "
              f"{span:.1f} s)")
        print(f"   {'':34} {'p50':>8} {'p95':>8} {'p99':>8} {'max':>8} {'mean':>8}")
        for tag, label in (("idle", "idle"), ("accepted", "under the 202 load"), ("wait", "under the ?wait=1 load")):
            lat = late[tag]
            print(f"   {label}: {lat.fired}/{lat.expected} fired" + (f", {lat.failed} not ok" if lat.failed else "")
                  + (" (only those due before the load ended are counted)" if tag != "idle" else ""))
            print(lateness_row("  claimed (store; the histogram)", lat.claimed_ms))
            print(lateness_row("  action began (transcript)", lat.began_ms))
        idle99 = pct(late["idle"].began_ms, 99)
        for tag in ("accepted", "wait"):
            got99 = pct(late[tag].began_ms, 99)
            ratio = got99 / idle99 if idle99 and idle99 == idle99 and idle99 > 0 else float("nan")
            print(f"   p99 action began, {tag:8} load vs idle: {got99:7.1f} ms vs {idle99:6.1f} ms ({ratio:.1f}x)  "
                  f"[target p99 <= {TARGET_P99_MS:.0f} ms: {verdict(got99 <= TARGET_P99_MS)}]")
        hist = metrics.get("lateness")
        if hist:
            print(f"   /metrics chainlang_task_lateness_seconds: {hist}")

        print(f"\n3. baselines (same machine, same run; no HTTP unless said)")
        print(f"   {'':44} {'events/s':>10} {'us/event':>9} {'CPU us/ev':>9}  serve 202 rate vs it")
        rows = [
            (f"fire() in process, 1 at a time ({inproc_n})", inproc_n, *seq),
            (f"fire() in process, {c} at a time ({inproc_n})", inproc_n, *par),
            (f"  + store claim/finish (serve's ledger)", inproc_n, *stored),
            (f"emit_async() (loads the project), 1 at a time ({api_n})", api_n, *api),
        ]
        accepted = loads[0].rate
        for label, count, wall, cpu in rows:
            rate = count / wall
            print(f"   {label:44} {rate:10,.0f} {wall / count * 1e6:9,.0f} {cpu / count * 1e6:9,.0f}  "
                  f"{accepted / rate:6.2f}x")
        emit_cpu = seq[1] / inproc_n * 1e6
        print(f"   a one-step emit in process: {emit_cpu:,.0f} us CPU  [target <= {TARGET_EMIT_CPU_US:.0f} us: "
              f"{'PASS' if emit_cpu <= TARGET_EMIT_CPU_US else 'MISS (above target)'}]")
        for kind, got in hellos.items():
            print(f"   {'aiohttp hello world over HTTP, ' + kind + ' client':44} {got.rate:10,.0f} "
                  f"{got.done_s / got.n * 1e6:9,.0f} {got.server_cpu_s / got.n * 1e6:9,.0f}  "
                  f"{accepted / got.rate:6.2f}x   (CPU: the server's; the client's "
                  f"{got.client_cpu_s / got.n * 1e6:,.0f} us/ev)")
        print(f"   best serve rate {best_rate:,.0f}/s; serve's CPU per event "
              f"{loads[0].server_cpu_s / n * 1e6:,.0f} us (202), {loads[1].server_cpu_s / n * 1e6:,.0f} us (wait) vs "
              f"{stored[1] / inproc_n * 1e6:,.0f} us for fire()+store in process")

        if profile_load is not None and args.profile is not None:
            print(f"\n4. profile: serve under cProfile (CPU time per thread), {n:,} events in 202 mode, "
                  f"{profile_load.rate:,.0f}/s under the profiler; stats in {args.profile}")
            merged = [line for line in (base / "profiled.log").read_text(errors="replace").splitlines()
                      if line.startswith("profile:")]
            if merged:
                print(f"   ({merged[-1]})")
            if args.profile.is_file():
                print_profile(args.profile, args.top)
            else:
                print(f"   (no stats written; serve's log: {(base / 'profiled.log').read_text(errors='replace')[-800:]})")
    return 0


def _revision() -> str:
    """The checkout's commit, and whether its files differ from it."""
    here = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "chainlang"], cwd=here,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "an unknown revision"
    return f"{head or '?'}{' + uncommitted changes' if dirty else ''}"


async def _final_metrics(url: str) -> dict[str, str]:
    async with Client("aiohttp", 2) as http:
        text = await http.text(f"{url}/metrics")
    buckets = []
    for line in text.splitlines():
        if line.startswith("chainlang_task_lateness_seconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append(f"<={le}s:{float(line.rsplit(' ', 1)[1]):.0f}")
    return {"lateness": " ".join(b for b in buckets if not b.startswith("<=+Inf"))} if buckets else {}


if __name__ == "__main__":
    raise SystemExit(main())
