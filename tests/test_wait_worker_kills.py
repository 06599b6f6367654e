"""SIGKILL of ONE worker of `chainlang serve --workers 2` around a delivery (issue 24).

The project is the one of tests/test_wait_kills.py (a chain that waits for `approval.given`,
pauses 1.5 s, then records one line of effects with the NOT idempotent `k.record`). `serve
--workers 2` is a supervisor, two HTTP workers on one port and one tasks worker (which runs
the waits' deadlines and resumes the runs other processes left settled); the supervisor
starts a new worker for one that died (at most 5 times a minute, so a serve here takes at
most KILLS_PER_SERVE kills).

- `test_a_serve_worker_killed_around_a_delivery`: WORKER_KILLS detached runs wait, one draft
  each; for each, the approval is POSTed with an Idempotency-Key and one worker process
  (not the group) is SIGKILLed: an HTTP worker chosen at random just after the POST was sent,
  or, in the 1.8 s after the store recorded the delivery, the worker that holds the run's
  transcript (its pid is in the transcript's head file) while it resumes the run. A POST
  that got no answer is sent again with the same key, as a client retrying does.
- `test_the_tasks_worker_killed_around_a_wait_deadline`: TIMEOUT_KILLS runs wait with a
  2 s timeout and `on_timeout: continue`; the tasks worker is killed at a random moment
  around the deadline (before it, or while it settles the wait and resumes the run).

- `test_a_temporal_worker_killed_around_a_delivery` (a Temporal dev server; skipped, saying
  why, without the CLI or the SDK): foreground runs on Temporal, the `chainlang worker`
  killed before the emit (its signal, and the emit's own hooks, find no worker until a new
  one starts), just after the signal, or in the pause after the workflow took the delivery.

What must hold: every run ends `ok` exactly once, the step after the wait ran once (one
line of effects per run), one `wait_finished` (the emit's id and payload, or `timed_out`),
and no wait is left waiting or settled but unfinished. `CHAINLANG_KILL_SEED=N` replays the
choices.
"""

from __future__ import annotations

import os
import random
import signal
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from tests.helpers import Spawned, cli, cli_many, records, records_so_far, show
from tests.serve_util import Server, Servers, servers  # noqa: F401  (servers: a fixture)
from tests.test_wait_kills import (EVENT, SEED, check_run, effects, emit_args, finished, kill_at, make_project,
                                   no_wait_left, until)

pytestmark = pytest.mark.slow

WORKER_KILLS = 6  # serve workers killed around a delivery
KILLS_PER_SERVE = 3  # the supervisor gives up after 5 restarts in a minute
TIMEOUT_KILLS = 3  # tasks workers killed around a wait's deadline

LATE = """\
    chain: kill.late
    inputs:
      draft: {type: string}
    events:
      approval.given:
        description: An approver answered the draft.
        payload:
          type: object
          properties:
            draft_id: {type: string}
            note: {type: string}
          required: [draft_id, note]
    steps:
      - wait:
          event: approval.given
          where: "draft_id == inputs.draft"
          timeout: 2s
          on_timeout: continue
        id: approval
      - k.pause: {ms: 1500}
      - k.record: {kind: timeout, ref: "{inputs.draft}"}
    outputs:
      result: "{approval.result}"
    """


def workers(server: Server) -> dict[int, str]:
    """The live worker processes of `server`'s supervisor: pid -> role (http, tasks)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            args = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == server.proc.pid and fields[0] != "Z" and b"--worker" in args:
            found[int(entry)] = args[args.index(b"--worker") + 1].decode()
    return found


def listening(pid: int) -> bool:
    """Whether process `pid` holds a listening TCP socket (an HTTP worker that took the port)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        inodes |= {fields[9] for fields in map(str.split, lines) if fields[3] == "0A"}
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return any(link.startswith("socket:[") and link[8:-1] in inodes for link in links)


def all_workers(server: Server) -> dict[int, str]:
    """The supervisor's workers once all three run and both HTTP workers listen."""
    def ready() -> dict[int, str] | None:
        got = workers(server)
        if len(got) == 3 and all(listening(pid) for pid, role in got.items() if role == "http"):
            return got
        return None

    found = until("the supervisor runs its 3 workers", lambda: ready() or not server.alive(), every=0.05)
    assert server.alive(), server.describe()
    return dict(found)


def holder(transcript: Path) -> int | None:
    """The pid of the process that last took the run (the transcript's head file)."""
    try:
        head = transcript.with_name(transcript.name + ".head").read_text()
    except OSError:
        return None
    return int(head.split()[0].split("=")[1]) if head.startswith("pid=") else None


def ended(transcript: Path) -> bool:
    """The run went past its wait: its transcript ends with a run_finished that is not
    `waiting` (a detached run ends so when it waits, before serve resumes it)."""
    return finished(transcript) and records_so_far(transcript)[-1].get("status") != "waiting"


def ending(transcript: Path) -> str:
    """The last record of a transcript, as a progress line would name it."""
    last = records_so_far(transcript)[-1]
    return f"{last['type']} {last.get('status') or last.get('event') or ''}".strip()


def wait_of(root: Path, run_id: str) -> Any:
    from chainlang.tasks.stored import project_store

    with project_store(root) as store:
        return store.get_wait(run_id, "1")


def sigkill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def all_waits_finished(root: Path) -> bool:
    """Whether no wait is left waiting or settled but unfinished. A worker killed after its run
    ended and before it marked the wait finished leaves the row settled: the next turn of a
    keeper (within serve's CHECK_SECONDS) resumes the finished run, which does nothing, and
    marks it; so the tests wait for this before they stop serve."""
    from chainlang.tasks.stored import project_store

    with project_store(root) as store:
        return not store.unfinished_waits() and not store.list_waits()


def test_a_serve_worker_killed_around_a_delivery(tmp_path: Path, servers: Servers) -> None:
    from chainlang.tasks.stored import project_store

    rng = random.Random(SEED + 3)
    print(f"seed {SEED} (CHAINLANG_KILL_SEED={SEED} replays the choices)")
    root = make_project(tmp_path / "project")
    drafts = [f"draft-{j}" for j in range(WORKER_KILLS)]
    notes = [f"note-{j}-{rng.randrange(10**9)}" for j in range(WORKER_KILLS)]
    keys = [f"approval-{j}" for j in range(WORKER_KILLS)]
    transcripts = [tmp_path / f"run-{j}.jsonl" for j in range(WORKER_KILLS)]
    for j, done in enumerate(cli_many(*((root, ["run", "approve.chain.yaml", "--detach", "--input", f"draft={d}",
                                                 "--transcript", t, "--progress", "quiet"])
                                          for d, t in zip(drafts, transcripts)))):
        assert done.returncode == 4, (j, show(done))
    run_ids = [records(t)[0]["run_id"] for t in transcripts]
    answered: dict[int, int] = {}

    def post(server: Server, j: int) -> None:
        try:
            answered[j] = server.event(EVENT, {"draft_id": drafts[j], "note": notes[j]}, key=keys[j]).status_code
        except httpx.HTTPError:
            pass  # its worker was killed before it answered: the client sends it again

    def status(j: int) -> str | None:
        with project_store(root) as store:
            row = store.get_wait(run_ids[j], "1")
        return None if row is None else row.status

    def retry(server: Server, j: int) -> None:  # the other HTTP worker (or the new one) answers
        def sent() -> bool:
            post(server, j)
            return 200 <= answered.get(j, 0) < 300

        until(f"the approval of run {j} is answered", sent, timeout=60, every=0.2)

    kills = 0
    server: Server | None = None
    for j in range(WORKER_KILLS):
        if j % KILLS_PER_SERVE == 0:
            if server is not None:
                assert server.stop() == 0, server.describe()
            server = servers.start(root, "--workers", "2")
        assert server is not None
        live = all_workers(server)
        poster = threading.Thread(target=post, args=(server, j))
        poster.start()
        if rng.random() < 0.4:
            time.sleep(rng.uniform(0.0, 0.05))
            victim = rng.choice(sorted(pid for pid, role in live.items() if role == "http"))
            when = "just after the POST was sent (an HTTP worker at random)"
        else:
            until(f"serve delivers to run {j}", lambda: status(j) != "waiting", every=0.01)
            time.sleep(rng.uniform(0.0, 1.8))
            pid = holder(transcripts[j])
            if pid in live:
                victim, when = pid, "after the delivery (the worker resuming the run)"
            else:
                victim = rng.choice(sorted(pid for pid, role in live.items() if role == "http"))
                when = "after the delivery (the run's holder is gone: an HTTP worker at random)"
        kills += sigkill(victim)
        poster.join(60)
        print(f"  worker {victim} ({live[victim]}) killed {when}; the wait: {status(j)}; the run's transcript "
              f"ends {ending(transcripts[j])}; answer {answered.get(j, 'none')}")
        if not 200 <= answered.get(j, 0) < 300:
            retry(server, j)

    assert server is not None
    for j, path in enumerate(transcripts):  # the tasks worker resumes what a killed worker left
        until(f"serve ends run {j}", lambda: ended(path), timeout=120)
    until("serve marks every wait finished", lambda: all_waits_finished(root), timeout=60)
    assert server.stop() == 0, server.describe()
    print(f"  {kills} SIGKILLs")
    for j in range(WORKER_KILLS):
        check_run(root, transcripts[j], drafts[j], notes[j], keys[j])
    assert len(effects(root)) == WORKER_KILLS, (SEED, effects(root))
    no_wait_left(root)


def test_the_tasks_worker_killed_around_a_wait_deadline(tmp_path: Path, servers: Servers) -> None:
    from chainlang.tasks.stored import project_store

    rng = random.Random(SEED + 4)
    print(f"seed {SEED} (CHAINLANG_KILL_SEED={SEED} replays the choices)")
    root = make_project(tmp_path / "project")
    (root / "late.chain.yaml").write_text(textwrap.dedent(LATE), encoding="utf-8")
    server = servers.start(root, "--workers", "2")

    def status(run_id: str) -> str | None:
        with project_store(root) as store:
            row = store.get_wait(run_id, "1")
        return None if row is None else row.status

    kills = 0
    transcripts = [tmp_path / f"late-{j}.jsonl" for j in range(TIMEOUT_KILLS)]
    for j, transcript in enumerate(transcripts):
        live = all_workers(server)
        [tasks] = [pid for pid, role in live.items() if role == "tasks"]
        done = cli_many((root, ["run", "late.chain.yaml", "--detach", "--input", f"draft=late-{j}",
                                "--transcript", transcript, "--progress", "quiet"]))[0]
        assert done.returncode == 4, show(done)
        run_id = records_so_far(transcript)[0]["run_id"]
        waited = time.monotonic()
        if rng.random() < 0.3:  # while the tasks worker holds the wait, before its deadline (2 s)
            moment, when = rng.uniform(0.5, 2.0), "after the run waited"
            time.sleep(max(0.0, waited + moment - time.monotonic()))
        else:  # after the tasks worker settled it as timed out: while it resumes the run (the pause)
            until(f"the deadline of late run {j} is taken", lambda: status(run_id) != "waiting", every=0.01)
            moment, when = rng.uniform(0.0, 1.8), "after the wait timed out"
            time.sleep(moment)
        kills += sigkill(tasks)
        print(f"  tasks worker {tasks} killed {moment:.2f} s {when}; the wait: {status(run_id)}; the run's "
              f"transcript ends {ending(transcript)}")

    for j, path in enumerate(transcripts):
        until(f"serve ends late run {j}", lambda: ended(path), timeout=120)
    until("serve marks every wait finished", lambda: all_waits_finished(root), timeout=60)
    assert server.stop() == 0, server.describe()
    print(f"  {kills} SIGKILLs")
    with project_store(root) as store:
        for j, path in enumerate(transcripts):
            recs = records(path)
            run_id, end = recs[0]["run_id"], recs[-1]
            where = f"seed {SEED}, late run {j}"
            assert end["type"] == "run_finished" and end["status"] == "ok", (where, end)
            assert end["outputs"] == {"result": None}, (where, end)
            done_recs = [r for r in recs if r["type"] == "wait_finished"]
            assert [r["status"] for r in done_recs] == ["timed_out"], (where, done_recs)
            mine = [e for e in effects(root) if e["run"] == run_id]
            assert [(e["kind"], e["ref"]) for e in mine] == [("timeout", f"late-{j}")], (where, mine)
            row = store.get_wait(run_id, "1")
            assert row is not None and row.status == "timed_out" and row.finished_at is not None, (where, row)
    no_wait_left(root)


# -- a Temporal worker (a real dev server: tests/temporal_util.py; skipped, saying why, without it)

TEMPORAL_CASES = ("signalled while no worker runs", "killed just after the signal",
                  "killed after the workflow took the delivery")


@pytest.fixture(scope="module")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.temporal_util import dev_server

    yield from dev_server(tmp_path_factory.mktemp("temporal") / "server.log")


def test_a_temporal_worker_killed_around_a_delivery(temporal_server: str, tmp_path: Path, spawned: Spawned) -> None:
    """One foreground run on Temporal per case of TEMPORAL_CASES, each waiting for its draft;
    the `chainlang worker` is SIGKILLed: before the emit (the signal finds no worker), at a
    random moment in the 0.3 s after `chainlang emit` signalled, or in the 1 s after the
    workflow recorded `wait_finished` (the activity of the pause that follows); a new worker
    is started. Each run must end ok, its step after the wait run once."""
    from chainlang.tasks.stored import project_store
    from tests.temporal_util import Workers, temporal_toml

    rng = random.Random(SEED + 5)
    print(f"seed {SEED} (CHAINLANG_KILL_SEED={SEED} replays the choices)")
    root = make_project(tmp_path / "project")
    (root / "chainlang.toml").write_text(temporal_toml(temporal_server, "kills", tools="kill_tools.py"),
                                         encoding="utf-8")
    workers = Workers(root)
    kills = 0
    try:
        worker = workers.start()
        for j, case in enumerate(TEMPORAL_CASES):
            draft, note, key = f"draft-{j}", f"note-{j}-{rng.randrange(10**9)}", f"approval-{j}"
            transcript = tmp_path / f"run-{j}.jsonl"
            run = spawned.start(root, "run", "approve.chain.yaml", "--input", f"draft={draft}", "--transcript",
                                transcript, "--progress", "plain")
            until(f"run {j} waits", lambda: run.poll() is not None or any(
                r["type"] == "wait_started" for r in records_so_far(transcript)), timeout=120)
            assert run.poll() is None, show(run, *run.communicate())
            run_id = records_so_far(transcript)[0]["run_id"]
            moment = 0.0
            if case == TEMPORAL_CASES[0]:  # the emit (whose hooks run on Temporal too) waits for a worker
                kills += kill_at(time.monotonic(), worker)
                emit = spawned.start(root, *emit_args(draft, note, key))
                with project_store(root) as store:  # its delivery to the store, if it comes before a worker
                    end = time.monotonic() + 10
                    while time.monotonic() < end and emit.poll() is None and getattr(
                            store.get_wait(run_id, "1"), "status", None) == "waiting":
                        time.sleep(0.05)
                print(f"  no worker: the wait is {getattr(wait_of(root, run_id), 'status', None)}")
                worker = workers.start()
                out, err = emit.communicate(timeout=120)
                assert emit.returncode == 0, show(emit, out, err)
            else:
                emitted = cli(root, *emit_args(draft, note, key))
                assert emitted.returncode == 0, show(emitted)
            if case == TEMPORAL_CASES[1]:
                moment = rng.uniform(0.0, 0.3)
                kills += kill_at(time.monotonic() + moment, worker)
            elif case == TEMPORAL_CASES[2]:
                with project_store(root) as store:
                    until(f"the workflow of run {j} takes the delivery", lambda: getattr(
                        store.get_wait(run_id, "1"), "finished_at", None), timeout=120)
                moment = rng.uniform(0.0, 1.0)
                kills += kill_at(time.monotonic() + moment, worker)
            print(f"  the worker {case} ({moment:.2f} s); the run's transcript ends {ending(transcript)}")
            if worker.poll() is not None:
                worker = workers.start()
            out, err = run.communicate(timeout=240)
            assert run.returncode == 0, (f"seed {SEED}: {case}", show(run, out, err))
            check_run(root, transcript, draft, note, key)
    finally:
        workers.close()
    print(f"  {kills} SIGKILLs")
    assert len(effects(root)) == len(TEMPORAL_CASES), (SEED, effects(root))
    no_wait_left(root)
