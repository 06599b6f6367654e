"""SIGKILL around the delivery of an event to a waiting run (LANGUAGE.md §15, issue 24).

The project (built in `tmp_path`): the tools of tests/kill_tools.py and a chain that waits
for `approval.given` (its `draft_id` equal to the run's input `draft`), pauses 1.5 s (an
idempotent step a kill may cut), then records the note of the payload it was given with
`k.record`, which is NOT idempotent and appends one line to `.chainlang/state/effects.jsonl`.
The pause is there so that every kill of these tests lands before `k.record` begins.

- `test_runs_killed_around_a_delivery`: RUNS foreground `chainlang run`s wait for the same
  draft; each is killed once at a random moment: while it waits (before the event), or in
  the 0.8 s after the store recorded the delivery of `chainlang emit` (while the run has not
  seen it yet, while it records `wait_finished`, in the pause after it). Then about half of
  the resumes are killed too, in the 0.6 s after they begin writing; then each run is
  resumed to its end.
- `test_emits_killed_around_a_delivery`: EMITS detached runs wait, one draft each; for each,
  `chainlang emit --id` is killed at a random moment of its start-up (calibrated on a first
  emit that is not killed), or in the 80 ms after its id was claimed in the store (before or
  after the delivery, which follows the claim). Then the same emit (same --id, same data)
  is sent again to its end, and for two of them once more; then the runs are resumed.
- `test_serve_killed_around_a_delivery_and_its_resume`: SERVE_KILLS serves killed around a
  POST /events and the resume of its run (see there); then
  `test_serve_killed_while_resuming_a_run_resumes_it_when_it_starts_again`, the case it
  once got wrong: serve marks a wait finished only once the run it resumed went on, so a run
  it was resuming when it was killed is resumed by the next serve.
- `test_a_run_killed_after_recording_wait_finished_marks_its_wait_finished_on_resume`: the
  one-transaction window no random kill hits, made by cutting the transcript.

What must hold, whatever the moments:
- every run ends `ok`, its output the note emitted, with one `wait_started` and one
  `wait_finished` (status ok, the payload emitted, the emit's id) in its transcript;
- the step after the wait ran exactly once: one line in the effects file per run, carrying
  the note emitted (one `k.record` step_started in the transcript);
- the store: each wait delivered once (one `wait_delivered` entry in its event log), by the
  emit's id, with the payload emitted, and marked finished (no settled wait left for
  someone to resume); a killed emit left its wait either delivered (as above) or waiting.

The seed is printed (and is in every failure message); `CHAINLANG_KILL_SEED=N` replays the
choices (which run is killed when; not the processes' own timing).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from tests.helpers import Spawned, cli, cli_many, records, records_so_far, show
from tests.serve_util import Servers, servers  # noqa: F401  (servers: a fixture)

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
SEED = int(os.environ.get("CHAINLANG_KILL_SEED", str(random.SystemRandom().randrange(10**6))))
RUNS = 10  # foreground runs, each killed once (and about half of their resumes)
EMITS = 6  # emits killed
SERVE_KILLS = 6  # serves killed
EVENT = "approval.given"

CHAIN = """\
    chain: kill.approve
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
          timeout: 10m
        id: approval
      - k.pause: {ms: 1500}
      - k.record: {kind: after, ref: "{approval.result.note}"}
    outputs:
      note: "{approval.result.note}"
    """


def make_project(root: Path) -> Path:
    root.mkdir()
    shutil.copy(HERE / "kill_tools.py", root / "kill_tools.py")
    (root / "chainlang.toml").write_text('chains = ["."]\ntools = ["kill_tools.py"]\n', encoding="utf-8")
    (root / "approve.chain.yaml").write_text(textwrap.dedent(CHAIN), encoding="utf-8")
    return root


def until(what: str, check: Callable[[], Any], timeout: float = 90.0, every: float = 0.05) -> Any:
    """Poll `check` until it returns something true (returned), or fail after `timeout` s."""
    end = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            pytest.fail(f"seed {SEED}: {what}: not so after {timeout} s")
        time.sleep(every)


def kinds(path: Path) -> list[str]:
    return [r["type"] for r in records_so_far(path)]


def effects(root: Path) -> list[dict[str, Any]]:
    path = root / ".chainlang" / "state" / "effects.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def kill_at(moment: float, proc: "subprocess.Popen[str]") -> bool:
    """SIGKILL `proc`'s process group at `moment` (time.monotonic); whether it was still running."""
    time.sleep(max(0.0, moment - time.monotonic()))
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    return True


def emit_args(draft: str, note: str, key: str) -> list[str]:
    return ["emit", EVENT, "--data", json.dumps({"draft_id": draft, "note": note}), "--id", key,
            "--progress", "quiet"]


def finished(path: Path) -> bool:
    return bool(path.exists() and kinds(path)[-1:] == ["run_finished"])


def check_run(root: Path, transcript: Path, draft: str, note: str, key: str) -> str:
    """The invariants of one run that was given (draft, note) by the emit `key`; its run id."""
    from chainlang.tasks.stored import project_store

    recs = records(transcript)
    run_id = recs[0]["run_id"]
    where = f"seed {SEED}, run {run_id} ({transcript.name})"
    end = recs[-1]
    assert end["type"] == "run_finished" and end["status"] == "ok", (where, end)
    assert end["outputs"] == {"note": note}, (where, end)
    started = [r for r in recs if r["type"] == "wait_started"]
    done = [r for r in recs if r["type"] == "wait_finished"]
    assert len(started) == 1 and started[0]["values"] == {"inputs.draft": draft}, (where, started)
    assert len(done) == 1, (where, done)
    assert (done[0]["status"], done[0]["payload"], done[0]["emit_id"]) == (
        "ok", {"draft_id": draft, "note": note}, key), (where, done)
    recorded = [r for r in recs if r["type"] == "step_started" and r["event"] == "k.record"]
    assert len(recorded) == 1, (where, recorded)
    mine = [e for e in effects(root) if e["run"] == run_id]
    assert [(e["kind"], e["ref"]) for e in mine] == [("after", note)], (where, mine)
    with project_store(root) as store:
        row = store.get_wait(run_id, "1")
        log = [e for e in store.events(limit=100_000) if e["subject"] == f"{run_id}/1"]
    assert row is not None and row.status == "delivered", (where, row)
    assert (row.payload, row.emit_id) == ({"draft_id": draft, "note": note}, key), (where, row)
    assert row.finished_at is not None, (where, "the wait is settled but not marked finished", row)
    assert [e["kind"] for e in log].count("wait_delivered") == 1, (where, log)
    return str(run_id)


def no_wait_left(root: Path) -> None:
    from chainlang.tasks.stored import project_store

    with project_store(root) as store:
        left = store.unfinished_waits()
        waiting = store.list_waits()
    assert not left, (f"seed {SEED}: settled waits no run finished", [r.to_json() for r in left])
    assert not waiting, (f"seed {SEED}: waits still waiting", [r.to_json() for r in waiting])


def test_runs_killed_around_a_delivery(tmp_path: Path, spawned: Spawned) -> None:
    rng = random.Random(SEED)
    print(f"seed {SEED} (CHAINLANG_KILL_SEED={SEED} replays the choices)")
    root = make_project(tmp_path / "project")
    draft, note, key = "draft-1", f"note-{rng.randrange(10**9)}", "approval-1"
    transcripts = [tmp_path / f"run-{k}.jsonl" for k in range(RUNS)]
    procs = [spawned.start(root, "run", "approve.chain.yaml", "--input", f"draft={draft}", "--transcript", path,
                           "--progress", "plain") for path in transcripts]
    for path, proc in zip(transcripts, procs):
        until(f"{path.name} waits", lambda: "wait_started" in kinds(path) or proc.poll() is not None)
        assert proc.poll() is None, show(proc, *proc.communicate())

    # each run killed once: while it waits (before the emit), or at a random moment in the 0.8 s after the
    # store delivered the event (the run sees it within 0.2 s, records wait_finished, tells the store, pauses)
    from chainlang.tasks.stored import project_store

    run_ids = [records_so_far(path)[0]["run_id"] for path in transcripts]
    early = sorted((rng.uniform(0.0, 0.3), k) for k in range(RUNS) if rng.random() < 0.3)
    late = sorted((rng.uniform(0.0, 0.8), k) for k in range(RUNS) if k not in {k for _, k in early})
    killed = []

    def kill(k: int, moment: float, when: str) -> None:
        if kill_at(moment, procs[k]):
            killed.append(k)
            print(f"  killed run {k} {when}; its transcript ends {kinds(transcripts[k])[-1]}")

    start = time.monotonic()
    for offset, k in early:
        kill(k, start + offset, f"{offset:.2f} s after it waited")
    emit = spawned.start(root, *emit_args(draft, note, key))
    with project_store(root) as store:
        until("the emit delivers the event", lambda: emit.poll() is not None or all(
            getattr(store.get_wait(run_ids[k], "1"), "status", None) == "delivered" for _, k in late), every=0.01)
    delivered = time.monotonic()
    for offset, k in late:
        kill(k, delivered + offset, f"{offset:.2f} s after the delivery")
    out, err = emit.communicate(timeout=120)
    assert emit.returncode == 0, show(emit, out, err)
    for k, proc in enumerate(procs):  # those a kill missed go on by themselves
        if k not in killed:
            proc.communicate(timeout=120)
            assert proc.returncode == 0, show(proc)
    kills = len(killed)

    # about half the resumes killed too, at a random moment in the 0.6 s after they begin writing
    for k in killed:
        if rng.random() < 0.5 and not finished(transcripts[k]):
            before = len(records_so_far(transcripts[k]))
            resume = spawned.start(root, "resume", transcripts[k], "--progress", "plain")
            until(f"the resume of run {k} writes", lambda: resume.poll() is not None
                  or len(records_so_far(transcripts[k])) > before, every=0.01)
            moment = rng.uniform(0.0, 0.6)
            if kill_at(time.monotonic() + moment, resume):
                kills += 1
                print(f"  killed the resume of run {k} {moment:.2f} s after it began writing; its transcript ends "
                      f"{kinds(transcripts[k])[-1]}")
    todo = [k for k in killed if not finished(transcripts[k])]
    for k, done in zip(todo, cli_many(*((root, ["resume", transcripts[k], "--progress", "plain"]) for k in todo))):
        assert done.returncode == 0, (f"seed {SEED}: run {k}", show(done))
    print(f"  {kills} SIGKILLs")

    assert {check_run(root, path, draft, note, key) for path in transcripts} == set(run_ids)
    assert len(effects(root)) == RUNS, (SEED, effects(root))
    no_wait_left(root)


def test_emits_killed_around_a_delivery(tmp_path: Path, spawned: Spawned) -> None:
    rng = random.Random(SEED + 1)
    print(f"seed {SEED} (CHAINLANG_KILL_SEED={SEED} replays the choices)")
    root = make_project(tmp_path / "project")
    count = EMITS + 1  # the first one calibrates: its emit is not killed
    drafts = [f"draft-{j}" for j in range(count)]
    notes = [f"note-{j}-{rng.randrange(10**9)}" for j in range(count)]
    keys = [f"approval-{j}" for j in range(count)]
    transcripts = [tmp_path / f"run-{j}.jsonl" for j in range(count)]
    for j, done in enumerate(cli_many(*((root, ["run", "approve.chain.yaml", "--detach", "--input", f"draft={d}",
                                                 "--transcript", t, "--progress", "quiet"])
                                          for d, t in zip(drafts, transcripts)))):
        assert done.returncode == 4, (j, show(done))

    began = time.monotonic()
    first = cli(root, *emit_args(drafts[0], notes[0], keys[0]))
    assert first.returncode == 0, show(first)
    span = time.monotonic() - began  # one emit's life, start-up included

    from chainlang.tasks.stored import project_store

    kills = 0
    for j in range(1, count):  # killed at a random moment of its start-up, or just after its claim in the store
        run_id = records_so_far(transcripts[j])[0]["run_id"]
        emit = spawned.start(root, *emit_args(drafts[j], notes[j], keys[j]))
        with project_store(root) as store:
            if rng.random() < 0.3:
                moment, when = rng.uniform(0.2, 0.9) * span, "of its start-up"
            else:
                until(f"emit {j} claims its id", lambda: emit.poll() is not None or store.get_emit(keys[j]),
                      every=0.005)
                moment, when = rng.uniform(0.0, 0.08), "after its claim"
            if kill_at(time.monotonic() + moment, emit):
                kills += 1
            claim = store.get_emit(keys[j])
            row = store.get_wait(run_id, "1")
        assert row is not None and row.status in ("waiting", "delivered"), (SEED, j, row)
        if row.status == "delivered":  # delivered once, with what was emitted; or not at all
            assert (row.payload, row.emit_id) == ({"draft_id": drafts[j], "note": notes[j]}, keys[j]), (SEED, row)
        print(f"  emit {j}: {'killed' if emit.returncode == -signal.SIGKILL else 'ended'} {moment:.3f} s {when} "
              f"(an emit lasts {span:.2f} s); its claim: {claim.status if claim else 'none'}, the wait: {row.status}")

    for j in range(1, count):  # the client sends it again, to its end; then once more
        again = cli(root, *emit_args(drafts[j], notes[j], keys[j]))
        assert again.returncode == 0, (SEED, j, show(again))
    for j in (1, count - 1):
        once_more = cli(root, *emit_args(drafts[j], notes[j], keys[j]))
        assert once_more.returncode == 0, (SEED, j, show(once_more))
    print(f"  {kills} SIGKILLs")

    for j, done in enumerate(cli_many(*((root, ["resume", t, "--progress", "quiet"]) for t in transcripts))):
        assert done.returncode == 0, (f"seed {SEED}: run {j}", show(done))
    for j in range(count):
        check_run(root, transcripts[j], drafts[j], notes[j], keys[j])
    assert len(effects(root)) == count, (SEED, effects(root))
    no_wait_left(root)


def test_a_run_killed_after_recording_wait_finished_marks_its_wait_finished_on_resume(tmp_path: Path) -> None:
    """A kill between the commit of `wait_finished` and the store's `finish_wait` (a window
    of one transaction, too narrow for the random kills above): the resume replays the
    wait, and must still mark the row finished, or the store keeps listing a settled wait
    no run took (`unfinished_waits`: a run that serve would resume for ever)."""
    from chainlang.tasks.stored import project_store
    from tests.journal_util import cut_after

    root = make_project(tmp_path / "project")
    transcript = tmp_path / "run.jsonl"
    waiting = cli(root, "run", "approve.chain.yaml", "--detach", "--input", "draft=d", "--transcript", transcript)
    assert waiting.returncode == 4, show(waiting)
    emitted = cli(root, *emit_args("d", "t", "k"))
    assert emitted.returncode == 0, show(emitted)
    done = cli(root, "resume", transcript)
    assert done.returncode == 0, show(done)
    run_id = records(transcript)[0]["run_id"]
    # as the kill leaves it: the transcript ends with wait_finished, the row is settled but not finished
    cut_after(transcript, lambda rec: rec["type"] == "wait_finished")
    with sqlite3.connect(root / ".chainlang" / "store.db") as db:
        db.execute("UPDATE waits SET finished_at = NULL WHERE run_id = ?", (run_id,))
    with project_store(root) as store:
        assert [r.run_id for r in store.unfinished_waits()] == [run_id]

    again = cli(root, "resume", transcript)
    assert again.returncode == 0, show(again)
    assert records(transcript)[-1]["status"] == "ok"
    with project_store(root) as store:
        row = store.get_wait(run_id, "1")
        assert row is not None and row.finished_at is not None, row
        assert store.unfinished_waits() == []


def test_serve_killed_around_a_delivery_and_its_resume(tmp_path: Path, servers: Servers) -> None:
    """SERVE_KILLS detached runs wait, one draft each; for each, a serve starts (resuming what
    the last one left), the approval is POSTed with an Idempotency-Key, and the serve's
    process group is killed at a random moment: just after the POST was sent (before or
    around its delivery), or in the 1.8 s after the store recorded the delivery (while serve
    resumes the run: wait_finished, the pause). A POST that got no answer is sent again
    (same key) to the next serve, as a client retrying does. A last serve runs until every
    run ended, and is stopped with SIGTERM."""
    from chainlang.tasks.stored import project_store

    rng = random.Random(SEED + 2)
    print(f"seed {SEED} (CHAINLANG_KILL_SEED={SEED} replays the choices)")
    root = make_project(tmp_path / "project")
    drafts = [f"draft-{j}" for j in range(SERVE_KILLS)]
    notes = [f"note-{j}-{rng.randrange(10**9)}" for j in range(SERVE_KILLS)]
    keys = [f"approval-{j}" for j in range(SERVE_KILLS)]
    transcripts = [tmp_path / f"run-{j}.jsonl" for j in range(SERVE_KILLS)]
    for j, done in enumerate(cli_many(*((root, ["run", "approve.chain.yaml", "--detach", "--input", f"draft={d}",
                                                 "--transcript", t, "--progress", "quiet"])
                                          for d, t in zip(drafts, transcripts)))):
        assert done.returncode == 4, (j, show(done))
    run_ids = [records(t)[0]["run_id"] for t in transcripts]
    answered: dict[int, int] = {}  # run -> the status code of its approval's answer

    def post(server: Any, j: int) -> None:
        try:
            answered[j] = server.event(EVENT, {"draft_id": drafts[j], "note": notes[j]}, key=keys[j]).status_code
        except httpx.HTTPError:
            pass  # killed before it answered: the client sends it again

    def status(j: int) -> str | None:
        with project_store(root) as store:
            row = store.get_wait(run_ids[j], "1")
        return None if row is None else row.status

    kills = 0
    for j in range(SERVE_KILLS):
        server = servers.start(root)
        for earlier in [i for i in range(j) if not 200 <= answered.get(i, 0) < 300]:  # retried, to this serve
            post(server, earlier)
        poster = threading.Thread(target=post, args=(server, j))
        poster.start()
        if rng.random() < 0.4:
            moment, when = rng.uniform(0.0, 0.05), "after the POST was sent"
        else:
            until(f"serve delivers to run {j}", lambda: status(j) != "waiting" or not server.alive(), every=0.01)
            moment, when = rng.uniform(0.0, 1.8), "after the delivery"
        time.sleep(moment)
        alive = server.alive()
        server.kill()
        poster.join(60)
        kills += alive
        print(f"  serve {j}: {'killed' if alive else 'had ended'} {moment:.2f} s {when}; the wait: {status(j)}; "
              f"the run's transcript ends {kinds(transcripts[j])[-1]}; answer {answered.get(j, 'none')}")

    server = servers.start(root)
    for j in [i for i in range(SERVE_KILLS) if not 200 <= answered.get(i, 0) < 300]:
        post(server, j)
        assert 200 <= answered.get(j, 0) < 300, (SEED, j, answered.get(j), server.describe())
    for j, path in enumerate(transcripts):
        until(f"serve ends run {j}", lambda: finished(path), timeout=120)
    assert server.stop() == 0, server.describe()
    print(f"  {kills} SIGKILLs")
    for j in range(SERVE_KILLS):
        check_run(root, transcripts[j], drafts[j], notes[j], keys[j])
    assert len(effects(root)) == SERVE_KILLS, (SEED, effects(root))
    no_wait_left(root)


def test_serve_killed_while_resuming_a_run_resumes_it_when_it_starts_again(tmp_path: Path, servers: Servers) -> None:
    """The deterministic case of the test above: serve is killed while the run it resumed
    after a delivery is in the pause after its wait; the next serve must take it to its end."""
    root = make_project(tmp_path / "project")
    transcript = tmp_path / "run.jsonl"
    waiting = cli(root, "run", "approve.chain.yaml", "--detach", "--input", "draft=d", "--transcript", transcript)
    assert waiting.returncode == 4, show(waiting)
    server = servers.start(root)
    reply = server.event(EVENT, {"draft_id": "d", "note": "n"}, key="k")
    assert reply.status_code == 202, (reply.status_code, reply.text)
    until("serve's resume is in the pause after the wait", lambda: records_so_far(transcript)[-1:] and (
        records_so_far(transcript)[-1].get("event") == "k.pause"), every=0.01)
    server.kill()
    assert kinds(transcript)[-1] == "step_started", "the kill did not land in the pause: " + str(kinds(transcript))

    server = servers.start(root)
    until("the next serve ends the run", lambda: finished(transcript), timeout=30)
    assert server.stop() == 0, server.describe()
    check_run(root, transcript, "d", "n", "k")
