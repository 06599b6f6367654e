"""Waiting inside a run on Temporal (LANGUAGE.md §15, §14), through the CLI, against a real
Temporal dev server on loopback (tests/temporal_util.py; skipped, saying why, without the
SDK or the CLI).

A wait on Temporal is the workflow waiting for the `wait_delivered` signal, with a timer
(chainlang.engine.temporal.waits); `chainlang emit` settles the store's row, then signals
(chainlang.engine.temporal.wake). The contract: the same chain, waiting for the same event,
ends the same on both engines, with the same records once what changes from run to run is
taken out. The timeouts on both engines are contract cases of their own
(tests/engines/wait-timeout-*.chain.yaml, run by tests/test_temporal.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from chainlang.testing.expect import golden_lines
from tests.helpers import Spawned, cli, records, records_so_far, show
from tests.temporal_util import Workers, dev_server, temporal_toml

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tests" / "run" / "run_tools.py"
WAIT = 90.0  # seconds for a run on a loaded machine to reach its wait, or to end after the event

pytestmark = pytest.mark.slow  # a Temporal server and a worker

EVENTS = """\
events:
  approval.given:
    payload:
      type: object
      properties:
        draft_id: {type: string}
        approved: {type: boolean}
      required: [draft_id, approved]
hooks: []
"""

# the where compares the payload with a value of the run (frozen when the wait began)
APPROVE = """\
inputs:
  draft: {type: string, default: d-42}
steps:
  - test.echo: {value: "{inputs.draft}"}
    id: draft
  - wait:
      event: approval.given
      where: "draft_id == draft.result"
      timeout: 1d
    id: approval
  - test.echo: {value: "approved: {approval.result.approved}"}
    id: after
outputs: {approved: "{approval.result.approved}", said: "{after.result}"}
"""

ASK = """\
steps:
  - user.ask: {question: "Book the room for Tuesday?", choices: [yes, no], timeout: 1d}
    id: book
  - test.echo: {value: "answer {book.result.answer} by {book.result.by}"}
outputs: {said: "{test.echo.result}"}
"""

# the wait is in a named chain, which runs as a child workflow: the signal reaches it through its parent
GATE = """\
chain: gate.pass
inputs:
  id: {type: string}
steps:
  - wait: {event: approval.given, where: "draft_id == inputs.id", timeout: 1d}
    id: opened
outputs: {approved: "{opened.result.approved}"}
"""

OUTER = """\
steps:
  - test.echo: {value: g-7}
  - gate.pass: {id: "{test.echo.result}"}
outputs: {approved: "{gate.pass.approved}"}
"""


def make_project(directory: Path, toml: str) -> Path:
    directory.mkdir(parents=True)
    shutil.copy(TOOLS, directory / "tools.py")
    (directory / "chainlang.toml").write_text(toml, encoding="utf-8")
    (directory / "approvals.hooks.yaml").write_text(EVENTS, encoding="utf-8")
    (directory / "lib").mkdir()
    (directory / "lib" / "gate.chain.yaml").write_text(GATE, encoding="utf-8")
    for name, text in (("approve", APPROVE), ("ask", ASK), ("outer", OUTER)):
        (directory / f"{name}.chain.yaml").write_text(text, encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from dev_server(tmp_path_factory.mktemp("temporal") / "server.log")


@pytest.fixture(scope="module")
def engines(server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Two copies of one project: on the embedded engine, and on Temporal (with a worker)."""
    base = tmp_path_factory.mktemp("waits")
    embedded = make_project(base / "embedded", 'tools = ["tools.py"]\nchains = ["."]\n')
    temporal = make_project(base / "temporal", temporal_toml(server, "waits"))
    workers = Workers(temporal)
    workers.start()
    try:
        yield embedded, temporal
    finally:
        workers.close()


def start_run(spawned: Spawned, project: Path, chain: str, transcript: str, *args: str) -> "subprocess.Popen[str]":
    return spawned.start(project, "run", chain, "--json", "--transcript", transcript, *args)


def reached_wait(project: Path, transcript: str, proc: "subprocess.Popen[str]") -> dict[str, Any]:
    """The wait_started record of the run, once its transcript has it."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        started = [r for r in records_so_far(project / transcript) if r["type"] == "wait_started"]
        if started:
            return started[0]
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"{project.name}: the run ended before it waited\n{show(proc, out, err)}")
        time.sleep(0.1)
    pytest.fail(f"{project.name}: the run did not reach its wait within {WAIT} s")


def ended(proc: "subprocess.Popen[str]", project: Path) -> tuple[int, dict[str, Any], str]:
    try:
        out, err = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{project.name}: the run did not go on after the event\n{show(proc, out, err)}")
    assert "Traceback" not in err, show(proc, out, err)
    return proc.returncode, json.loads(out), err


def comparable(recs: list[dict[str, Any]]) -> list[str]:
    return sorted(golden_lines(recs))


def both_runs(engines: tuple[Path, Path], spawned: Spawned, chain: str, emit: Any) -> list[list[dict[str, Any]]]:
    """Run `chain` on both engines; once each waits, `emit(project, wait_started)`; each must
    end ok with the same outputs. The records of each run."""
    transcript = chain.replace(".chain.yaml", ".jsonl")
    procs = [start_run(spawned, project, chain, transcript) for project in engines]
    outcomes = []
    for project, proc in zip(engines, procs):
        emit(project, reached_wait(project, transcript, proc))
        code, result, err = ended(proc, project)
        assert code == 0, f"{project.name}: {result}\n{err}"
        for volatile in ("run_id", "duration_ms", "transcript"):
            result.pop(volatile, None)
        outcomes.append(result)
    assert outcomes[0] == outcomes[1]
    return [records(project, transcript) for project in engines]


def test_a_wait_on_temporal_takes_the_matching_event_once_as_on_the_embedded_engine(
        engines: tuple[Path, Path], spawned: Spawned) -> None:
    """An event for another draft is not taken; the matching one, emitted twice with the same
    id, is delivered once; an event after that finds no wait; the records are the embedded
    engine's."""
    def emit(project: Path, wait: dict[str, Any]) -> None:
        assert wait["values"] == {"draft.result": "d-42"}
        other = cli(project, "emit", "approval.given", "--data", '{"draft_id": "d-41", "approved": false}')
        assert other.returncode == 0, show(other)
        for _ in range(2):  # the same emit id twice: the second is a duplicate, delivered to nobody
            again = cli(project, "emit", "approval.given", "--data", '{"draft_id": "d-42", "approved": true}',
                        "--id", "approval-1", "--json")
            assert again.returncode == 0, show(again)

    on_embedded, on_temporal = both_runs(engines, spawned, "approve.chain.yaml", emit)
    assert comparable(on_temporal) == comparable(on_embedded)
    finished = [r for r in on_temporal if r["type"] == "wait_finished"]
    assert [(r["status"], r["emit_id"], r["payload"]) for r in finished] == [
        ("ok", "approval-1", {"draft_id": "d-42", "approved": True})]
    assert [r["result"] for r in on_temporal if r["type"] == "step_finished" and r["step"] == "3"] == ["approved: true"]


def test_user_ask_answered_by_emit_and_a_wait_in_a_child_workflow(engines: tuple[Path, Path],
                                                                   spawned: Spawned) -> None:
    """user.ask on Temporal takes the answer emitted as user.answered; a wait in a named chain
    (a child workflow on Temporal) gets its event through the parent workflow."""
    def answer(project: Path, wait: dict[str, Any]) -> None:
        question = wait["question"]
        refused = cli(project, "emit", "user.answered", "--data",
                      json.dumps({"question_id": question["id"], "answer": "maybe"}))
        assert refused.returncode == 1, show(refused)  # not a choice: refused, the run keeps waiting
        given = cli(project, "emit", "user.answered", "--data",
                    json.dumps({"question_id": question["id"], "answer": "yes", "by": "ana"}))
        assert given.returncode == 0, show(given)

    on_embedded, on_temporal = both_runs(engines, spawned, "ask.chain.yaml", answer)
    assert comparable(on_temporal) == comparable(on_embedded)
    assert [r["result"] for r in on_temporal if r["type"] == "step_finished"] == ["answer yes by ana"]

    def open_gate(project: Path, wait: dict[str, Any]) -> None:
        assert wait["step"] == "2/1"
        given = cli(project, "emit", "approval.given", "--data", '{"draft_id": "g-7", "approved": true}')
        assert given.returncode == 0, show(given)

    on_embedded, on_temporal = both_runs(engines, spawned, "outer.chain.yaml", open_gate)
    assert comparable(on_temporal) == comparable(on_embedded)


def wait_row(project: Path, run_id: str, step: str) -> Any:
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        return store.get_wait(run_id, step)


def test_detach_leaves_the_run_waiting_on_temporal_and_a_lost_signal_is_sent_again(engines: tuple[Path, Path]) -> None:
    """`run --detach` ends with exit 4 at the wait (the workflow keeps waiting); a delivery
    written to the store whose signal never left (the sender died in between) still reaches
    the workflow: the worker sends it again, and the run finishes its wait."""
    _, temporal = engines
    detached = cli(temporal, "run", "approve.chain.yaml", "--detach", "--json", "--transcript", "detached.jsonl",
                   timeout=WAIT)
    assert detached.returncode == 4, show(detached)
    recs = records(temporal, "detached.jsonl")
    assert [r["type"] for r in recs][-2:] == ["wait_started", "run_finished"]
    assert recs[-1]["status"] == "waiting" and recs[-1]["error"]["step"] == "2", recs[-1]
    run_id = recs[0]["run_id"]
    row = wait_row(temporal, run_id, "2")
    assert (row.status, row.engine) == ("waiting", "temporal")

    from chainlang.tasks.stored import project_store

    with project_store(temporal) as store:  # delivered in the store only, as by a process killed before it signalled
        assert store.deliver_waits([(run_id, "2")], {"draft_id": "d-42", "approved": True}, "lost-1")
    deadline = time.monotonic() + WAIT
    while wait_row(temporal, run_id, "2").finished_at is None:  # the workflow recorded wait_finished
        assert time.monotonic() < deadline, "the workflow never got the delivery"
        time.sleep(0.2)
