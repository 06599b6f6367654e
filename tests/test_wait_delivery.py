"""The store's waits and the delivery of events to them (§15): what an event matches, that a
wait takes one event at most, that a timeout and a delivery cannot both win, and that an
emitted event reaches every run it matches and still fires its post: hooks."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from chainlang.runtime.deliver import check_answer, deliver_event, matches
from chainlang.store import open_store
from chainlang.store.waits import WaitRow

from tests.helpers import cli, records


def row(run: str, step: str = "2", event: str = "approval.given", where: str | None = "draft_id == d.result",
        frozen: dict[str, Any] | None = None, key: Any = "d-1", question: dict[str, Any] | None = None) -> WaitRow:
    frozen = {"d.result": key} if frozen is None else frozen
    return WaitRow(run_id=run, step=step, event=event, where=where, frozen=frozen, deadline=None,
                   transcript=f"runs/{run}.jsonl", chain="c", engine="embedded", status="waiting", created_at="",
                   match_field="draft_id" if where and "draft_id ==" in where else None,
                   match_value=key if where and "draft_id ==" in where else None, question=question)


def test_an_event_matches_by_its_where_with_the_values_frozen_when_the_wait_began(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        store.open_wait(row("r1", key="d-1"))
        store.open_wait(row("r2", key="d-2"))
        store.open_wait(row("r3", where="approved and amount > d.result", frozen={"d.result": 100}, key=None))
        store.open_wait(row("r4", event="other.event"))
        assert [r.run_id for r in store.waiting_for("approval.given", {"draft_id": "d-1"})] == ["r1", "r3"]
        got = deliver_event(store, "approval.given", {"draft_id": "d-1", "approved": True, "amount": 150}, "e-1")
        assert sorted(r.run_id for r in got) == ["r1", "r3"]  # one event, two runs
        assert all(r.status == "delivered" and r.emit_id == "e-1" for r in got)
        assert store.get_wait("r2", "2").status == "waiting"  # another key: not its event
        assert store.get_wait("r4", "2").status == "waiting"  # another event name
        # a wait takes one event: a second matching event is delivered to nobody
        assert deliver_event(store, "approval.given", {"draft_id": "d-1", "approved": True, "amount": 150}, "e-2") == []
        assert store.get_wait("r1", "2").emit_id == "e-1"


def test_a_where_that_fails_on_a_payload_is_not_a_match() -> None:
    wait = row("r", where="amount > 10", frozen={}, key=None)
    assert not matches(wait, {"amount": "many"})  # a type error in the where: not a crash, not a match
    assert matches(wait, {"amount": 11})
    assert matches(row("r", where=None, frozen={}, key=None), {"anything": 1})
    assert matches(row("r", key=1), {"draft_id": 1.0})  # 1 == 1.0 in the language, and for the store's key


def test_registering_again_keeps_the_first_deadline_and_what_it_was_given(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        first = row("r1")
        first.deadline = "2030-01-01T00:00:00.000Z"
        store.open_wait(first)
        again = row("r1", key="d-9")
        again.deadline = "2031-01-01T00:00:00.000Z"
        kept = store.open_wait(again)
        assert kept.deadline == "2030-01-01T00:00:00.000Z" and kept.match_value == "d-1"


def test_a_timeout_and_a_delivery_race_and_exactly_one_wins(tmp_path: Path) -> None:
    with open_store(tmp_path) as store:
        for i in range(40):
            store.open_wait(row(f"r{i}", key=f"d-{i}"))
    outcomes: dict[str, list[str]] = {}

    def deliver() -> None:
        with open_store(tmp_path) as store:
            for i in range(40):
                for r in deliver_event(store, "approval.given", {"draft_id": f"d-{i}"}, "e"):
                    outcomes.setdefault(r.run_id, []).append("delivered")

    def time_out() -> None:
        with open_store(tmp_path) as store:
            for i in range(40):
                if store.settle_wait(f"r{i}", "2", "timed_out") is not None:
                    outcomes.setdefault(f"r{i}", []).append("timed_out")

    threads = [threading.Thread(target=deliver), threading.Thread(target=time_out)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == sorted(f"r{i}" for i in range(40))
    assert all(len(won) == 1 for won in outcomes.values()), outcomes
    with open_store(tmp_path) as store:
        for run, won in outcomes.items():
            assert store.get_wait(run, "2").status == won[0]


def test_an_answer_is_checked_against_the_question(tmp_path: Path) -> None:
    question = {"id": "q-1", "question": "Book it?", "choices": ["yes", "no"]}
    with open_store(tmp_path) as store:
        store.open_wait(row("r1", event="user.answered", where="question_id == 'q-1'", frozen={}, key=None,
                            question=question))
        assert check_answer(store, {"question_id": "q-1", "answer": "yes"}) == []
        assert "not one of the choices" in check_answer(store, {"question_id": "q-1", "answer": "maybe"})[0]
        assert "no question q-2" in check_answer(store, {"question_id": "q-2", "answer": "yes"})[0]
        store.settle_wait("r1", "2", "cancelled")
        assert "was cancelled" in check_answer(store, {"question_id": "q-1", "answer": "yes"})[0]


CHAIN = """\
chain: mail.approve
events:
  approval.given:
    payload:
      type: object
      properties:
        draft_id: {type: string}
        approved: {type: boolean}
      required: [draft_id, approved]
      additionalProperties: false
inputs:
  draft: {type: string}
steps:
  - wait:
      event: approval.given
      where: "draft_id == inputs.draft"
      timeout: 1d
    id: approval
outputs:
  approved: "{approval.result.approved}"
"""

HOOKS = """\
hooks:
  - id: audit
    trigger: post:approval.given
    action:
      - user.notify: {message: "approval {draft_id}"}
"""


def test_one_emit_reaches_every_run_it_matches_and_still_fires_its_hooks(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "approve.chain.yaml").write_text(CHAIN, encoding="utf-8")
    (tmp_path / "audit.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    transcripts = []
    for draft in ("d-1", "d-1", "d-2"):
        done = cli(tmp_path, "run", "approve.chain.yaml", "--input", f"draft={draft}", "--detach")
        assert done.returncode == 4, done.stderr
        transcripts.append(tmp_path / done.stderr.split("transcript: ")[1].split("\n")[0].strip())
    before = cli(tmp_path, "emit", "approval.given", "--data", '{"draft_id": "d-0", "approved": true}')
    assert before.returncode == 0, before.stderr
    sent = cli(tmp_path, "emit", "approval.given", "--data", '{"draft_id": "d-1", "approved": true}', "--json")
    assert sent.returncode == 0, sent.stderr
    fired = json.loads(sent.stdout)["fired"]
    assert [f["hook"] for f in fired] == ["audit"] and fired[0]["status"] == "ok"
    ends = []
    for where in transcripts[:2]:
        done = cli(tmp_path, "resume", str(where), "--json")
        assert done.returncode == 0, done.stderr
        ends.append(json.loads(done.stdout))
        finished = [r for r in records(where) if r["type"] == "wait_finished"]
        assert len(finished) == 1 and finished[0]["status"] == "ok"
        assert finished[0]["payload"] == {"draft_id": "d-1", "approved": True}
    assert ends == [{"approved": True}, {"approved": True}]
    still = cli(tmp_path, "resume", str(transcripts[2]), "--detach")  # d-2 got nothing: it still waits
    assert still.returncode == 4, still.stderr
    assert not [r for r in records(transcripts[2]) if r["type"] == "wait_finished"]


PARALLEL = """\
chain: prep.approve
events:
  ping.came:
    payload: {type: object, properties: {n: {type: integer}}, required: [n]}
steps:
  - parallel:
      - wait: {event: ping.came, where: "n == 1", timeout: 1d}
        id: ping
      - steps:
          - k.record: {kind: prep, ref: a, before_ms: 300}
          - k.record: {kind: prep, ref: b, before_ms: 300}
  - k.record: {kind: after, ref: "{ping.result.n}"}
"""


def test_a_detached_run_lets_the_other_branches_finish_their_steps_before_it_ends_waiting(tmp_path: Path) -> None:
    """`--detach` with a wait in one branch of a parallel group: the other branch's steps (not
    idempotent, slow) run to their end instead of being cut (cancelled, then refused on resume)."""
    import shutil

    shutil.copy(Path(__file__).parent / "kill_tools.py", tmp_path / "kill_tools.py")
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\ntools = ["kill_tools.py"]\n', encoding="utf-8")
    (tmp_path / "prep.chain.yaml").write_text(PARALLEL, encoding="utf-8")
    where = tmp_path / "run.jsonl"
    done = cli(tmp_path, "run", "prep.chain.yaml", "--detach", "--transcript", str(where))
    assert done.returncode == 4, done.stderr
    ends = {r["step"]: r["status"] for r in records(where) if r["type"] == "step_finished"}
    assert ends == {"1.2.1": "ok", "1.2.2": "ok"}, ends
    assert cli(tmp_path, "emit", "ping.came", "--data", '{"n": 1}').returncode == 0
    done = cli(tmp_path, "resume", str(where))
    assert done.returncode == 0, done.stderr
    effects = [json.loads(line) for line in (tmp_path / ".chainlang" / "state" / "effects.jsonl")
               .read_text(encoding="utf-8").splitlines()]
    assert [(e["kind"], e["ref"]) for e in effects] == [("prep", "a"), ("prep", "b"), ("after", "1")]
