"""`chainlang serve` killed with SIGKILL at random points: no task fired twice, none lost
(issue 9, LANGUAGE.md §9 and §12).

The project (built in `tmp_path`): the tools of tests/kill_tools.py, whose `k.record` is
NOT idempotent and appends one line per call to `.chainlang/state/effects.jsonl` (kind,
ref, the step's idempotency key, run id, pid); an external event `order.placed` with a hook
that pauses, records the order and pauses again (the pauses and the waits inside
`k.record` come with each event, so kills land before, inside and after the effect); and
scheduled tasks, stored by a setup chain: `tick` repeating every second and a few `once`
tasks (and a `delay` one) due while serve is being killed.

Then, `CYCLES` times: start `chainlang serve --port 0` (its own process group); either kill
it while it starts (recovering what the last one left), or once it listens post, spread over
the next second, some new orders with distinct `Idempotency-Key`s (some `?wait=1`), the keys
that got no answer before (a client retrying) and some keys that were answered (those whose
emits the last kill cut, and now and then any: duplicates), and SIGKILL serve's process
group after a random 0–1.5 s, wherever it is. What was in flight at each kill is printed.
At the end serve runs once more, the keys still unanswered are posted until they are
answered, the due tasks fire, and serve is stopped with SIGTERM.

What must hold — "exactly once" with §9's rule for a step that is not idempotent:

- every key posted is answered in the end (2xx), and every answer names the same run: the
  run the store's `emits` row holds for the key (a key acknowledged is never forgotten and
  run again under another run id);
- that run ended `ok` and its order was recorded exactly once; or k.record had started
  and had no recorded end when serve was killed, and the resume stopped with
  `unsafe_resume` naming that step instead of calling it again: then the order was recorded
  at most once (it may or may not have taken effect before the kill). Nothing else;
- no order is recorded by a run other than its key's, nor twice;
- `task_runs` holds at most one row per (task, due moment), every task effect belongs to one
  of those rows' runs, and no row has two effects; a row `ok` has exactly one, a row
  `interrupted` is an `unsafe_resume` of k.record (at most one); no row is left `running`;
- every `once` (and the `delay`) task fired exactly once: one row, task `completed`;
- after the clean stop: no emit left `started`, no lease held, every transcript (seals
  verified) ends with `run_finished`, `ok` or `unsafe_resume`.

The seed is printed (and is in every failure message); `CHAINLANG_KILL_SEED=N` replays its
choices (the orders, their pauses, the kill times; not serve's own timing, so a failure may
need a few runs to show again), `CHAINLANG_KILL_CYCLES=N` changes the number of kills
(default 20). The project and each serve's output stay in the test's `tmp_path`.
"""

from __future__ import annotations

import http.client
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
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import clean_env, cli, command, show
from tests.hooks_util import validated

HERE = Path(__file__).resolve().parent
CYCLES = int(os.environ.get("CHAINLANG_KILL_CYCLES", "20"))
START_TIMEOUT = 30.0  # seconds for serve to listen
POST_TIMEOUT = 20.0  # seconds for one HTTP request
RECORD_STEP = "hook:book/2"  # the step of the order hook that calls k.record

HOOKS = """\
    events:
      order.placed:
        description: An order came in; the waits (ms) say where its action pauses.
        payload:
          type: object
          properties:
            n: {type: integer}
            pre_ms: {type: integer}
            before_ms: {type: integer}
            after_ms: {type: integer}
            post_ms: {type: integer}
          required: [n, pre_ms, before_ms, after_ms, post_ms]
    hooks:
      - id: book
        trigger: post:order.placed
        action:
          - k.pause: {ms: "{pre_ms}"}
          - k.record: {kind: order, ref: "n{n}", before_ms: "{before_ms}", after_ms: "{after_ms}"}
          - k.pause: {ms: "{post_ms}"}
    """

# (task id, seconds after setup) of the once tasks; `later` is a delay task of 9 s
# (the setup chain takes a second or two to start: the first is due 4 s after it is written)
ONCE = [("once-1", 4), ("once-2", 7), ("once-3", 10), ("once-4", 14), ("once-5", 18), ("once-6", 23)]
DELAY = ("later", 9)


def setup_chain(at: datetime) -> str:
    def record(task: str, ms: int) -> str:
        return f"        - k.record: {{kind: task, ref: {task}, before_ms: {ms}, after_ms: {ms}}}\n"

    text = "steps:\n"
    text += "  - task.schedule:\n      type: repeat\n      interval: \"1s\"\n      id: tick\n      action:\n"
    text += record("tick", 15)
    for task, seconds in ONCE:
        when = (at + timedelta(seconds=seconds)).isoformat(timespec="seconds")
        text += f"  - task.schedule:\n      type: once\n      at: \"{when}\"\n      id: {task}\n      action:\n"
        text += record(task, 40)
    text += (f"  - task.schedule:\n      type: delay\n      interval: \"{DELAY[1]}s\"\n      id: {DELAY[0]}\n"
             "      action:\n") + record(DELAY[0], 40)
    return text


def make_project(root: Path) -> Path:
    shutil.copy(HERE / "kill_tools.py", root / "kill_tools.py")
    (root / "chainlang.toml").write_text('tools = ["kill_tools.py"]\n\n[serve]\ngrace = "10s"\n', encoding="utf-8")
    (root / "orders.hooks.yaml").write_text(textwrap.dedent(HOOKS), encoding="utf-8")
    at = datetime.now(timezone.utc)
    (root / "setup.chain.yaml").write_text(setup_chain(at), encoding="utf-8")
    # the run's clock pinned to when the times were written: on a loaded machine the CLI may start
    # seconds later, and a `once` task must still be in the future for task.schedule (a late one just fires late)
    done = cli(root, "run", "setup.chain.yaml", "--now", at.isoformat())
    assert done.returncode == 0, show(done)
    for transcript in (root / ".chainlang" / "runs").glob("*.jsonl"):  # the setup run's: not serve's
        transcript.rename(root / f"setup-{transcript.name}")
        head = transcript.with_name(transcript.name + ".head")
        if head.exists():
            head.rename(root / f"setup-{head.name}")
    return root


# -- the client -------------------------------------------------------------------------------------


@dataclass
class Client:
    """The orders and what serve answered for each key (code, body), across serves."""

    rng: random.Random
    payloads: dict[str, dict[str, int]] = field(default_factory=dict)
    answers: dict[str, list[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)  # key -> posts that got no answer
    strange: list[str] = field(default_factory=list)  # answers that are neither 2xx nor 503
    lock: threading.Lock = field(default_factory=threading.Lock)

    def new_order(self) -> str:
        n = len(self.payloads) + 1
        key = f"order-{n}"
        r = self.rng
        self.payloads[key] = {"n": n, "pre_ms": r.randint(0, 150), "before_ms": r.randint(0, 60),
                              "after_ms": r.randint(0, 60), "post_ms": r.randint(0, 150)}
        return key

    def answered(self, key: str) -> bool:
        return any(200 <= code < 300 for code, _ in self.answers.get(key, []))

    def unanswered(self) -> list[str]:
        return [key for key in self.payloads if not self.answered(key)]

    def post(self, port: int, key: str, wait: bool, delay: float = 0.0) -> None:
        if delay:
            time.sleep(delay)
        body = json.dumps(self.payloads[key]).encode()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=POST_TIMEOUT)
        try:
            conn.request("POST", "/events/order.placed" + ("?wait=1" if wait else ""), body=body,
                         headers={"Idempotency-Key": key, "Content-Type": "application/json"})
            response = conn.getresponse()
            code, text = response.status, response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException):
            with self.lock:
                self.lost[key] = self.lost.get(key, 0) + 1
            return
        finally:
            conn.close()
        try:
            answer = json.loads(text)
        except ValueError:
            answer = {"unreadable": text[:300]}
        with self.lock:
            self.answers.setdefault(key, []).append((code, answer))
            if not (200 <= code < 300 or code == 503):
                self.strange.append(f"{key}: {code} {text[:300]}")


# -- serve --------------------------------------------------------------------------------------------


class Serve:
    """One `chainlang serve --port 0` in its own process group, output to files."""

    def __init__(self, root: Path, logs: Path, name: str) -> None:
        self.out, self.err = logs / f"{name}.out", logs / f"{name}.err"
        self.began = time.monotonic()
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(command("serve", "--port", "0"), cwd=root, env=clean_env(),
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)

    def port(self) -> int | None:
        text = self.out.read_text(encoding="utf-8", errors="replace")
        if " on http://127.0.0.1:" not in text:
            return None
        return int(text.split(" on http://127.0.0.1:", 1)[1].split()[0])

    def wait_port(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            port = self.port()
            if port is not None:
                return port
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                pytest.fail(f"serve did not start\n--- stdout\n{self.out.read_text()}\n"
                            f"--- stderr\n{self.err.read_text()}")
            time.sleep(0.01)

    def kill(self) -> float:
        """SIGKILL its process group; the seconds since it was started."""
        at = time.monotonic() - self.began
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        return at

    def text(self) -> str:
        return (self.out.read_text(encoding="utf-8", errors="replace")
                + self.err.read_text(encoding="utf-8", errors="replace"))


# -- reading the project ------------------------------------------------------------------------------


def store_rows(root: Path, sql: str) -> list[sqlite3.Row]:
    conn = sqlite3.connect(f"file:{root / '.chainlang' / 'store.db'}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def effects(root: Path) -> list[dict[str, Any]]:
    path = root / ".chainlang" / "state" / "effects.jsonl"
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert all(line.endswith("\n") for line in lines), "a torn line in the effects log"
    return [json.loads(line) for line in lines]


def raw_records(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a transcript (no check: it may have been cut by a kill)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.endswith("\n"):
            out.append(json.loads(line))
    return out


def where_killed(root: Path, listening: bool) -> tuple[str, list[str]]:
    """What was in flight when serve was killed: emits claimed and not ended (no transcript
    yet: intake; else the step their transcript was in), task firings running; and the keys
    of those emits."""
    found: list[str] = []
    keys: list[str] = []
    for row in store_rows(root, "SELECT key, transcript FROM emits WHERE status = 'started'"):
        found.append(f"{row['key']}@{_in_flight(Path(row['transcript']))}")
        keys.append(row["key"])
    for row in store_rows(root, "SELECT task_id, transcript FROM task_runs WHERE status = 'running'"):
        found.append(f"{row['task_id']}@{_in_flight(Path(row['transcript']))}")
    where = "listening" if listening else "starting"
    return f"{where}; in flight: {', '.join(found) if found else 'nothing'}", keys


def _in_flight(transcript: Path) -> str:
    if not transcript.exists() or transcript.stat().st_size == 0:
        return "no-transcript"
    recs = raw_records(transcript)
    if not recs:
        return "torn-header"
    last = recs[-1]
    if last["type"] == "run_finished":
        return f"ended-{last['status']}"
    if last["type"] == "step_started":
        return f"in-{last['step']}"
    if last["type"] == "step_finished":
        return f"after-{last['step']}"
    return f"at-{last['type']}"


# -- the test -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_serve_killed_at_random_points_fires_nothing_twice_and_loses_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("CHAINLANG_KILL_SEED") or random.randrange(2**32))
    print(f"\nserve kill test: seed {seed} (CHAINLANG_KILL_SEED={seed} replays it), {CYCLES} kills")
    rng = random.Random(seed)
    began = time.monotonic()
    (tmp_path / "project").mkdir()
    root = make_project(tmp_path / "project")
    logs = tmp_path / "logs"
    logs.mkdir()
    client = Client(rng)
    summary: list[str] = []
    cut: list[str] = []  # the keys whose emits were in flight at the last kill

    for cycle in range(CYCLES):
        serve = Serve(root, logs, f"serve-{cycle:02d}")
        threads: list[threading.Thread] = []
        posted = 0
        if rng.random() < 0.2:  # killed while it starts: recovering what the last one left
            time.sleep(rng.uniform(0.3, 1.5))
        else:
            port = serve.wait_port()
            jobs = [(key, rng.random() < 0.4) for key in client.unanswered() if rng.random() < 0.8]  # retries
            jobs += [(client.new_order(), rng.random() < 0.4) for _ in range(rng.randint(3, 6))]
            # the same key again although it was answered: an emit cut by the last kill, or any
            jobs += [(key, rng.random() < 0.5) for key in cut if client.answered(key) and rng.random() < 0.5]
            answered = [key for key in client.payloads if client.answered(key)]
            if answered and rng.random() < 0.3:
                jobs.append((rng.choice(answered), False))
            for key, wait in jobs:
                thread = threading.Thread(target=client.post, args=(port, key, wait, rng.uniform(0.0, 1.0)),
                                          daemon=True)
                thread.start()
                threads.append(thread)
            posted = len(jobs)
            time.sleep(rng.uniform(0.0, 1.5))
        listening = serve.port() is not None
        at = serve.kill()
        for thread in threads:
            thread.join(timeout=POST_TIMEOUT + 5)
        where, cut = where_killed(root, listening)
        line = f"kill {cycle + 1:2d} at {at:5.2f}s ({posted} posts): {where}"
        summary.append(line)
        print(line)
        assert "Traceback" not in serve.text(), f"seed {seed}, {serve.err}:\n{serve.text()}"

    # the last serve: the keys still unanswered are posted until answered; the tasks fire
    final = Serve(root, logs, "serve-final")
    port = final.wait_port()
    for _ in range(10):
        missing = client.unanswered()
        if not missing:
            break
        for key in missing:
            client.post(port, key, True)
    last_due = max(seconds for _, seconds in [*ONCE, DELAY])
    deadline = max(began + last_due + 20, time.monotonic() + 10)
    while time.monotonic() < deadline:
        once = store_rows(root, "SELECT status FROM tasks WHERE id != 'tick' AND kind = 'schedule'")
        started = store_rows(root, "SELECT key FROM emits WHERE status = 'started'")
        if all(row["status"] in ("completed", "dead") for row in once) and not started:
            break
        time.sleep(0.1)
    time.sleep(1.0)  # a firing of tick in this serve, stopped by SIGTERM below
    final.proc.send_signal(signal.SIGTERM)
    try:
        final.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        final.kill()
        pytest.fail(f"seed {seed}: serve did not stop within 30 s of SIGTERM\n{final.text()}")
    print(f"serve kill test: seed {seed}, {time.monotonic() - began:.1f}s")

    (logs / "client.json").write_text(json.dumps({"seed": seed, "payloads": client.payloads, "answers": client.answers,
                                                  "lost": client.lost, "strange": client.strange}, indent=1),
                                      encoding="utf-8")
    problems = check(root, client, seed)
    problems += [f"final serve: {text}" for text in _final_problems(final)]
    if problems:
        pytest.fail(f"seed {seed} (CHAINLANG_KILL_SEED={seed} replays it): {len(problems)} problem(s)\n  "
                    + "\n  ".join(problems[:60]) + "\nkills:\n  " + "\n  ".join(summary)
                    + f"\nproject kept in {root}")


def _final_problems(final: Serve) -> list[str]:
    text = final.text()
    out = []
    if final.proc.returncode != 0:
        out.append(f"exit code {final.proc.returncode}")
    if "serve stopped" not in text:
        out.append("no 'serve stopped'")
    if "Traceback" in text:
        out.append(f"a traceback:\n{text}")
    return out


def check(root: Path, client: Client, seed: int) -> list[str]:
    """Every way the run broke "exactly once, none lost" (empty: it held)."""
    problems: list[str] = []
    done = effects(root)
    emits = {row["key"]: row for row in store_rows(root, "SELECT * FROM emits")}
    task_runs = store_rows(root, "SELECT * FROM task_runs ORDER BY id")
    tasks = {row["id"]: row for row in store_rows(root, "SELECT * FROM tasks")}
    problems += [f"a strange answer: {text}" for text in client.strange]

    # -- orders: each key answered, one run, its effect once (or unsafe_resume: at most once)
    by_ref: dict[str, list[dict[str, Any]]] = {}
    for effect in done:
        if effect["kind"] == "order":
            by_ref.setdefault(effect["ref"], []).append(effect)
    outcomes: dict[str, int] = {}
    for key, payload in client.payloads.items():
        answers = [(code, body) for code, body in client.answers.get(key, []) if 200 <= code < 300]
        lines = by_ref.get(f"n{payload['n']}", [])
        if not answers:
            problems.append(f"{key}: never answered ({client.lost.get(key, 0)} posts without an answer)")
            continue
        row = emits.get(key)
        if row is None:
            problems.append(f"{key}: answered {answers} but no emits row")
            continue
        named = {body.get("run_id") for _, body in answers}
        if named != {row["run_id"]}:
            problems.append(f"{key}: the answers name the runs {sorted(map(str, named))}, the store "
                            f"{row['run_id']} (an acknowledged event run again under another id?) {answers}")
        if len(lines) > 1 or any(line["run"] != row["run_id"] for line in lines):
            problems.append(f"{key}: recorded {len(lines)} time(s), by the runs {[line['run'] for line in lines]} "
                            f"(keys {[line['key'] for line in lines]}); its run is {row['run_id']}")
        end = _end(Path(row["transcript"]))
        if end is None:
            problems.append(f"{key}: its transcript {row['transcript']} does not end with run_finished")
            continue
        status, error = end
        outcome = "ok" if status == "ok" else "unsafe_resume" if _unsafe(status, error) else f"{status} {error}"
        counted = f"{outcome} (recorded {len(lines)})"
        outcomes[counted] = outcomes.get(counted, 0) + 1
        if outcome == "ok":
            if len(lines) != 1 or row["status"] != "ok":
                problems.append(f"{key}: its run ended ok, the store says {row['status']}, recorded "
                                f"{len(lines)} time(s) (once expected)")
        elif outcome == "unsafe_resume":
            if row["status"] == "ok":
                problems.append(f"{key}: its run stopped unsafe_resume, the store says ok")
        else:
            problems.append(f"{key}: its run ended {outcome}")
    stray = [effect for ref, lines in by_ref.items() for effect in lines
             if f"order-{ref[1:]}" not in client.payloads]
    problems += [f"an order recorded that was never posted: {effect}" for effect in stray]
    left = [key for key, row in emits.items() if row["status"] == "started"]
    if left:
        problems.append(f"emits left started after the clean stop: {left}")

    # -- tasks: one run per due moment, one effect per run at most, once tasks fired once
    runs_of: dict[str, sqlite3.Row] = {}
    moments: dict[tuple[str, datetime], int] = {}  # the same instant however it is written
    for run in task_runs:
        runs_of[run["run_id"]] = run
        moment = (run["task_id"], datetime.fromisoformat(run["due_at"]))
        moments[moment] = moments.get(moment, 0) + 1
    problems += [f"task {task} fired {count} times for its moment {due}" for (task, due), count in moments.items()
                 if count > 1]
    per_run: dict[str, list[dict[str, Any]]] = {}
    for effect in done:
        if effect["kind"] != "task":
            continue
        owner = runs_of.get(effect["run"])
        if owner is None:
            problems.append(f"a task effect of a run the store does not hold: {effect}")
            continue
        if owner["task_id"] != effect["ref"]:
            problems.append(f"the run {owner['run_id']} of {owner['task_id']} recorded {effect['ref']}")
        per_run.setdefault(effect["run"], []).append(effect)
    task_outcomes: dict[str, int] = {}
    for run in task_runs:
        lines = per_run.get(run["run_id"], [])
        what = f"task {run['task_id']} due {run['due_at']} (run {run['run_id']}, {run['status']})"
        if len(lines) > 1:
            problems.append(f"{what}: recorded {len(lines)} times {[line['key'] for line in lines]}")
        end = _end(Path(run["transcript"]))
        if run["status"] == "ok":
            task_outcomes["ok"] = task_outcomes.get("ok", 0) + 1
            if len(lines) != 1:
                problems.append(f"{what}: ok but recorded {len(lines)} times")
        elif run["status"] == "interrupted" and end is not None and _unsafe(*end):
            counted = f"unsafe_resume (recorded {len(lines)})"
            task_outcomes[counted] = task_outcomes.get(counted, 0) + 1
        else:
            problems.append(f"{what}: its transcript ends {end}, its error {run['error']}")
    for task, _ in [*ONCE, DELAY]:
        fired = [run for run in task_runs if run["task_id"] == task]
        if len(fired) != 1 or tasks[task]["status"] != "completed":
            problems.append(f"{task}: {len(fired)} run(s), task {tasks[task]['status']} (one run, completed expected)")
    held = [row["id"] for row in tasks.values() if row["lease_owner"] is not None]
    if held:
        problems.append(f"leases held after the clean stop: {held}")
    if not [run for run in task_runs if run["task_id"] == "tick"]:
        problems.append("tick never fired")

    # -- every transcript of serve: sealed, ends with run_finished, belongs to an emit or a firing
    owners = {row["run_id"] for row in emits.values()} | set(runs_of)
    for transcript in sorted((root / ".chainlang" / "runs").glob("*.jsonl")):
        if transcript.stat().st_size == 0:  # a claim dropped before its run began
            if transcript.stem in owners:
                problems.append(f"{transcript.name}: empty, yet its run is in the store")
            continue
        try:
            recs = validated(transcript, root)
        except Exception as exc:  # noqa: BLE001 - reported with the others
            problems.append(f"{transcript.name}: does not verify: {type(exc).__name__}: {exc}")
            continue
        if transcript.stem not in owners:
            problems.append(f"{transcript.name}: a run of no emit and no task run in the store")
        last = recs[-1]
        if last["type"] != "run_finished" or not (last["status"] == "ok" or _unsafe(last["status"], last.get("error"))):
            problems.append(f"{transcript.name}: ends {last['type']} {last.get('status')} {last.get('error')}")
    print(f"serve kill test: seed {seed}: {len(client.payloads)} orders {outcomes}; {len(task_runs)} task runs "
          f"{task_outcomes} (tick {tasks['tick']['status']}); {sum(client.lost.values())} posts without an answer, "
          f"{sum(len(a) for a in client.answers.values())} answered")
    return problems


def _end(transcript: Path) -> tuple[str, Any] | None:
    """How a transcript ends: the status and error of its last record, a run_finished."""
    if not transcript.exists() or transcript.stat().st_size == 0:
        return None
    recs = raw_records(transcript)
    if not recs or recs[-1]["type"] != "run_finished":
        return None
    return str(recs[-1]["status"]), recs[-1].get("error")


def _unsafe(status: str, error: Any) -> bool:
    """The run stopped because k.record had started without a recorded end (§9): the
    expected outcome of a kill inside it."""
    return (status == "interrupted" and isinstance(error, dict) and error.get("type") == "unsafe_resume"
            and error.get("event") == "k.record")
