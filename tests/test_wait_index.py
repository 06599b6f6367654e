"""How the store finds the waits an event can match (store/waits.py `waiting_for`, §15 Scale).

An event's waits are found by their equality key (`draft_id == draft.result.id` stores the
key draft_id and the run's frozen value): what comes back is every wait of the event without
a key, and those whose key the payload has with the same value, oldest first. Finding them
must not read the waits of the same event for other keys: with 500 runs waiting for other
drafts, SQLite does as much work as with 5 (counted in virtual-machine steps through a
progress handler: deterministic, unlike a clock).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from chainlang.store import Store, open_store
from chainlang.store.waits import WaitRow


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path) as opened:
        yield opened


def wait(store: Store, run_id: str, event: str = "approval.given", field: str | None = "draft_id",
         value: Any = None, where: str | None = "draft_id == draft.result.id") -> WaitRow:
    return store.open_wait(WaitRow(run_id=run_id, step="2", event=event, where=where if field else None,
                                   frozen={"draft.result.id": value}, deadline=None, transcript=f"{run_id}.jsonl",
                                   chain="c", engine="embedded", status="waiting", created_at="",
                                   match_field=field, match_value=value))


def test_the_waits_an_event_can_match(store: Store) -> None:
    wait(store, "r1", value="d-1")
    wait(store, "r2", value="d-2")
    wait(store, "r3", field=None)  # no key: every event of its name is a candidate
    wait(store, "r4", value="d-1", event="other.event")
    wait(store, "r5", field="n", value=1, where="n == inputs.n")
    wait(store, "r6", value="d-1")
    store.settle_wait("r6", "2", "cancelled")  # settled: no event finds it any more
    found = lambda payload: [r.run_id for r in store.waiting_for("approval.given", payload)]  # noqa: E731
    assert found({"draft_id": "d-1", "approved": True}) == ["r1", "r3"]
    assert found({"draft_id": "d-2"}) == ["r2", "r3"]
    assert found({"draft_id": "d-9", "n": 1.0}) == ["r3", "r5"]  # 1 == 1.0: one key for both
    assert found({"draft_id": ["d-1"], "n": None}) == ["r3"]  # values that cannot be keys
    assert found(["not", "an", "object"]) == ["r3"]
    assert found({f"f{i}": i for i in range(1_000)} | {"draft_id": "d-2"}) == ["r2", "r3"]  # many fields
    assert store.waiting_for("nobody.waits", {"draft_id": "d-1"}) == []


def test_the_events_some_run_waits_for(tmp_path: Path) -> None:
    """serve's ledger asks, for each batch of events, which of them some run still waits for
    (also run on PostgreSQL: test_store_postgres)."""
    with open_store(tmp_path) as store:
        wait(store, "r1", value="d-1")
        wait(store, "r2", event="other.event", field=None)
        wait(store, "r3", event="settled.event", field=None)
        store.settle_wait("r3", "2", "cancelled")
        asked = ["approval.given", "other.event", "settled.event", "nobody.waits", "approval.given"]
        assert store.events_waited(asked) == {"approval.given", "other.event"}
        assert store.events_waited([]) == set()
        many = [f"e{i}" for i in range(1_200)] + ["other.event"]  # past one IN list of 500
        assert store.events_waited(iter(many)) == {"other.event"}


def vm_steps(store: Store, event: str, payload: Any) -> int:
    """SQLite virtual-machine steps (in hundreds) that `waiting_for` takes."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    with store._read("installing a step counter") as conn:  # the pooled connection waiting_for reuses
        raw = conn.connection.driver_connection
    raw.set_progress_handler(count, 100)
    try:
        rows = store.waiting_for(event, payload)
    finally:
        raw.set_progress_handler(None, 0)
    assert [r.run_id for r in rows] == ["target"]
    return steps[0]


def test_finding_an_events_waits_does_not_read_those_of_other_keys(tmp_path: Path) -> None:
    counts = {}
    for others in (5, 500):
        (tmp_path / f"store-{others}").mkdir()
        with open_store(tmp_path / f"store-{others}") as store:
            for i in range(others):
                wait(store, f"bg-{i:05d}", value=f"draft-{i}")
            wait(store, "target", value="draft-target")
            counts[others] = vm_steps(store, "approval.given", {"draft_id": "draft-target", "approved": True})
    # a scan of the event's waits takes ~100 times more steps with 100 times more waits; seeks do not
    assert counts[500] <= 2 * counts[5] + 5, counts
