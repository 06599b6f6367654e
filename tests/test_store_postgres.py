"""The project's store on PostgreSQL (`[store] url = "postgresql://..."`), against a real
server started on loopback (tests/pg_util.py; skipped, with the reason, where none can run).

- The store's behaviour tests that go through its API only (tests/test_store.py,
  tests/test_store_tasks.py, the store test of tests/test_threads.py) run again here
  unchanged, `open_store` pointed at a new PostgreSQL database; memory tests
  (tests/test_memory.py: search ranking included), thread and task.schedule tests run
  through the CLI in a project whose chainlang.toml names the database. The SQLite-only tests (the file, its pragmas, raw
  sqlite3 reads, the shipped version 1 code) stay in their modules.
- Real processes: two claim the same emit keys and the same due tasks; each is won once,
  and the two create the schema together.
- The CLI end to end: a chain with task.schedule and thread.* steps, then `chainlang tasks
  list` and `chainlang threads`, all on the PostgreSQL store.
- Errors name the server but never the password; a busy write lock; psycopg missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import chainlang.store.store as store_module
from chainlang.store import SCHEMA_VERSION, StoreError, open_store
from tests import test_memory, test_store, test_store_tasks, test_task_schedule, test_threads, test_wait_index
from tests.helpers import cli
from tests.pg_util import PgServer, pg_server, pg_url  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parent.parent
T0 = "2026-03-01T08:00:00+00:00"

API_TESTS: list[Callable[..., None]] = [
    test_store.test_the_second_claim_of_a_key_gets_the_first_run,
    test_store.test_finish_emit_records_the_final_status,
    test_store.test_the_event_log_records_claims_and_finishes_newest_last,
    test_store.test_a_closed_store_says_so,
    test_store.test_emit_batch_claims_and_finishes_in_one_transaction,
    test_store_tasks.test_add_get_list_cancel_retry_and_their_log,
    test_store_tasks.test_three_failures_in_a_row_make_a_dead_letter_and_retry_revives_it,
    test_store_tasks.test_a_once_task_completes_and_a_hook_stays_active,
    test_store_tasks.test_due_tasks_claim_and_the_lease_rules,
    test_store_tasks.test_next_due_leaves_out_the_tasks_held_at_now,
    test_store_tasks.test_a_task_cancelled_during_its_run_is_finished_and_stays_archived,
    test_threads.test_store_threads_and_their_events,
    test_wait_index.test_the_events_some_run_waits_for,
]

PROJECT_TESTS: list[Callable[..., None]] = [
    test_memory.test_append_keeps_the_entry_on_the_runs_day_with_its_keywords,
    test_memory.test_search_ranks_by_bm25_and_filters_by_type,
    test_memory.test_search_scope_and_date,
    test_memory.test_digest_groups_the_journal_into_people_and_projects,
    test_threads.test_a_related_message_continues_the_current_thread_and_is_recorded,
    test_threads.test_morning_routine_suggests_switching_to_the_thread_that_fits_better,
    test_task_schedule.test_each_type_returns_its_task_id_and_next_run_read_on_the_runs_clock,
]


def _cases(tests: list[Callable[..., None]]) -> list[Any]:
    """One case per test (and per parameter set of a parametrized one)."""
    cases = []
    for test in tests:
        name = f"{test.__module__.rpartition('.')[2]}::{test.__name__}"
        marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
        if not marks:
            cases.append(pytest.param(test, {}, id=name))
            continue
        names, values = marks[0].args[0], marks[0].args[1]
        keys = [k.strip() for k in names.split(",")] if isinstance(names, str) else list(names)
        for i, value in enumerate(values):
            value = value.values if hasattr(value, "values") else value
            cases.append(pytest.param(test, dict(zip(keys, value if len(keys) > 1 else (value,))), id=f"{name}[{i}]"))
    return cases


@pytest.mark.parametrize(("test", "params"), _cases(API_TESTS + [test_store.test_invalid_keys_are_refused_with_the_reason]))
def test_store_behaviour_on_postgres(test: Callable[..., None], params: dict[str, Any], pg_url: str,  # noqa: F811
                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = store_module.open_store

    def on_postgres(root: Path, url: str | None = None, **kw: Any) -> Any:
        return real(root, pg_url, **kw)

    module = sys.modules[test.__module__]
    if hasattr(module, "open_store"):
        monkeypatch.setattr(module, "open_store", on_postgres)
    monkeypatch.setattr(store_module, "open_store", on_postgres)  # `from chainlang.store import open_store`
    if hasattr(module, "log"):  # test_store_tasks reads the event log with sqlite3: read it with psycopg
        monkeypatch.setattr(module, "log", lambda root, *kinds: raw_log(pg_url, *kinds))
    test(tmp_path, **params)
    with real(tmp_path, pg_url) as store:  # and it really was PostgreSQL
        assert store.dialect == "postgresql" and store.schema_version() == SCHEMA_VERSION


def raw_log(url: str, *kinds: str) -> list[tuple[int, str, str, dict[str, Any]]]:
    """The event log read without the code under test."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT seq, kind, subject, data FROM event_log ORDER BY seq").fetchall()
    return [(seq, kind, subject, json.loads(data)) for seq, kind, subject, data in rows if not kinds or kind in kinds]


@pytest.mark.parametrize(("test", "params"), _cases(PROJECT_TESTS))
def test_project_through_the_cli_on_postgres(test: Callable[..., None], params: dict[str, Any], pg_url: str,  # noqa: F811
                                            tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text(f'[store]\nurl = "{pg_url}"\n', encoding="utf-8")
    test(tmp_path, **params)
    assert not (tmp_path / ".chainlang" / "store.db").exists()


# -- the schema ------------------------------------------------------------------------


def test_the_schema_on_postgres(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    import psycopg

    with open_store(tmp_path, pg_url) as store:
        assert store.schema_version() == SCHEMA_VERSION
        store.log("k", "s", {})
    with open_store(tmp_path, pg_url.replace("postgresql://", "postgresql+psycopg://")) as store:
        assert store.schema_version() == SCHEMA_VERSION and store.events()[0]["seq"] == 1
    with psycopg.connect(pg_url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        assert tables == {"chainlang_schema", "emits", "event_log", "tasks", "task_runs", "threads",
                          "thread_events", "journal", "knowledge", "waits"}
        assert [r[0] for r in conn.execute("SELECT version FROM chainlang_schema ORDER BY version")] == [1, 2, 3, 4, 5]
        sequences = {r[0] for r in conn.execute("SELECT sequencename FROM pg_sequences")}
        assert sequences == {"event_log_seq_seq", "task_runs_id_seq", "thread_events_seq_seq", "journal_id_seq",
                             "knowledge_id_seq"}
        indexes = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE '%fts'").fetchall())
        assert set(indexes) == {"journal_fts", "knowledge_fts"} and all("gin" in d for d in indexes.values())
        conn.execute("INSERT INTO chainlang_schema (version, applied_at) VALUES (9, 'later')")
    with pytest.raises(StoreError, match=f"newer chainlang \\(schema version 9, this one knows up to {SCHEMA_VERSION}"):
        open_store(tmp_path, pg_url)


def test_store_exists_asks_without_creating(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    from chainlang.tasks.stored import store_exists

    (tmp_path / "chainlang.toml").write_text(f'[store]\nurl = "{pg_url}"\n', encoding="utf-8")
    assert not store_exists(tmp_path) and not store_exists(tmp_path)
    open_store(tmp_path, pg_url).close()
    assert store_exists(tmp_path)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_stamp_of_the_stored_hooks_follows_them(backend: str, request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    with open_store(tmp_path, url) as store:
        assert store.hooks_stamp() == (0, None)
        store.add_task("schedule", {}, id="s")
        assert store.hooks_stamp() == (0, None)
        store.add_task("hook", {"trigger": "post:a"}, id="h1")
        store.add_task("hook", {"trigger": "post:b"}, id="h2")
        count, latest = store.hooks_stamp()
        assert count == 2 and latest == store.get_task("h2").updated_at  # type: ignore[union-attr]
        store.cancel_task("h1")
        assert store.hooks_stamp() == (1, latest)  # the count tells the cancel


def test_path_is_the_file_of_sqlite_stores_only(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    with open_store(tmp_path, pg_url) as store:
        with pytest.raises(StoreError, match="is a PostgreSQL database, not a file"):
            store.path
        assert "***" in repr(store) and store.where in repr(store)


# -- errors ----------------------------------------------------------------------------


def test_errors_name_the_server_and_never_the_password(pg_server: PgServer, tmp_path: Path) -> None:  # noqa: F811
    secret = pg_server.password
    wrong = pg_server.url("postgres").replace(secret, "not-the-password-42")
    with pytest.raises(StoreError) as err:
        open_store(tmp_path, wrong)
    message = str(err.value)
    assert "password authentication failed" in message and "PGPASSWORD" in message
    assert f"host 127.0.0.1, port {pg_server.port}, database postgres" in message
    assert "not-the-password-42" not in message and secret not in message

    with pytest.raises(StoreError) as err:
        open_store(tmp_path, pg_server.url("no_such_db"))
    assert "createdb no_such_db" in str(err.value) and secret not in str(err.value)

    from tests.pg_util import free_port

    port = free_port()  # nobody listens there
    down = f"postgresql://chainlang:{secret}@127.0.0.1:{port}/postgres"
    with pytest.raises(StoreError) as err:
        open_store(tmp_path, down, busy_timeout=2)
    assert f"cannot connect to the store" in str(err.value) and f"port {port}" in str(err.value)
    assert "check that the PostgreSQL server runs" in str(err.value) and secret not in str(err.value)

    for bad, expected in [("postgresql+asyncpg://u:pw@h/db", "driver 'asyncpg' is not supported"),
                          ("postgresql://u:pw@h", "names no database")]:
        with pytest.raises(StoreError, match=expected) as err:
            open_store(tmp_path, bad)
        assert ":pw@" not in str(err.value)


def test_a_writer_waits_for_the_write_lock_then_says_busy(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    import psycopg

    from chainlang.store.postgres import WRITE_LOCK

    with open_store(tmp_path, pg_url, busy_timeout=0.3) as store:
        store.claim_emit("before", "e", "r", "t")
        with psycopg.connect(pg_url) as holder:  # another process in a write transaction
            holder.execute(f"SELECT pg_advisory_xact_lock({WRITE_LOCK})")
            assert store.get_emit("before") is not None  # readers do not wait
            started = time.monotonic()
            with pytest.raises(StoreError, match="is busy: another process held its write lock past 0.3 s"):
                store.claim_emit("during", "e", "r", "t")
            assert 0.25 < time.monotonic() - started < 5
        assert store.claim_emit("after", "e", "r", "t").new and store.get_emit("during") is None


def test_without_psycopg_the_error_says_what_to_install(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    code = textwrap.dedent("""
        import sys
        from pathlib import Path
        sys.modules["psycopg"] = None  # as if it were not installed
        from chainlang.store import StoreError, open_store
        open_store(Path(sys.argv[1])).close()  # an SQLite store never needs it
        try:
            open_store(Path(sys.argv[1]), sys.argv[2])
        except StoreError as e:
            print(e)
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), pg_url], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'chainlang[postgres]'" in proc.stdout and "***" in proc.stdout
    assert pg_url.split(":")[2].split("@")[0] not in proc.stdout  # the password


def test_an_sqlite_project_never_imports_psycopg(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from chainlang.store import open_store; "
            "s = open_store(Path(sys.argv[1])); s.claim_emit('k', 'e', 'r', 't'); s.close(); "
            "assert 'psycopg' not in sys.modules, 'loaded'")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr


# -- processes -------------------------------------------------------------------------

RACER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from chainlang.store import open_store

    url, name, start, count = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    with open_store(Path("."), url) as store:  # the two create the schema together
        time.sleep(max(0.0, start - time.time()))
        for i in range(count):
            claim = store.claim_emit(f"key-{i}", "tick", f"{name}-{i}", f"runs/{name}-{i}.jsonl")
            lease = store.claim(f"task-{i}", name, "2026-03-01T09:00:00+00:00", 300)
            print(json.dumps([i, claim.new, claim.run_id, lease is not None]), flush=True)
""")


def test_two_processes_claiming_the_same_keys_and_due_tasks_each_is_won_once(pg_url: str,  # noqa: F811
                                                                                 tmp_path: Path) -> None:
    count = 40
    start = time.time() + 2.0  # both have opened the store (and made its schema) by then
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    children = {name: subprocess.Popen([sys.executable, "-c", RACER, pg_url, name, str(start), str(count)],
                                       cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       env=env)
                for name in ("p1", "p2")}
    # the tasks are added once the schema is there (the children made it)
    deadline = time.time() + 30
    while True:
        try:
            with open_store(tmp_path, pg_url) as store:
                for i in range(count):
                    store.add_task("schedule", {"n": i}, id=f"task-{i}", next_run=T0)
            break
        except StoreError:
            assert time.time() < deadline
            time.sleep(0.1)
    assert time.time() < start, "the tasks were added too late for the race"
    results = {}
    for name, child in children.items():
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results[name] = [json.loads(line) for line in out.splitlines()]
    keys = {name: {i for i, new, _, _ in rows if new} for name, rows in results.items()}
    leases = {name: {i for i, _, _, got in rows if got} for name, rows in results.items()}
    assert keys["p1"].isdisjoint(keys["p2"]) and keys["p1"] | keys["p2"] == set(range(count))
    assert leases["p1"].isdisjoint(leases["p2"]) and leases["p1"] | leases["p2"] == set(range(count))
    winner = {i: run for rows in results.values() for i, new, run, _ in rows if new}
    assert all(run == winner[i] for rows in results.values() for i, _, run, _ in rows)
    with open_store(tmp_path, pg_url) as store:
        events = store.events(10_000)
        assert sum(e["kind"] == "emit_claimed" for e in events) == count
        assert sum(e["kind"] == "lease_taken" for e in events) == count
        assert {t.lease_owner for t in store.list_tasks()} <= {"p1", "p2"}
    import psycopg

    with psycopg.connect(pg_url) as conn:  # each migration applied once
        assert conn.execute("SELECT count(*) FROM chainlang_schema").fetchone() == (SCHEMA_VERSION,)


# -- the CLI end to end ----------------------------------------------------------------

CHAIN = """\
steps:
  - thread.match: {message: "Planning the rocket launch with Sarah"}
  - memory.append: {thread_id: "{thread.match.thread_id}", content: "Sarah wants the launch budget"}
  - event: task.schedule
    id: remind
    params: {type: repeat, interval: 1 day, at: "tomorrow 08:00", action: [user.notify: {message: hi}]}
  - memory.search: {query: "budget"}
outputs:
  thread: "{thread.match.thread_id}"
  task: "{remind.task_id}"
  found: "{memory.search.matches}"
"""


def test_a_chain_run_through_the_cli_keeps_its_tasks_and_threads_on_postgres(pg_url: str,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text(f'[store]\nurl = "{pg_url}"\n', encoding="utf-8")
    (tmp_path / "plan.chain.yaml").write_text(CHAIN, encoding="utf-8")
    ran = cli(tmp_path, "run", "plan.chain.yaml", "--now", "2026-11-23T10:00:00+00:00", "--json")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    outputs = json.loads(ran.stdout)
    assert outputs["task"] and outputs["thread"] and "budget" in json.dumps(outputs["found"])
    listed = cli(tmp_path, "tasks", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (task,) = json.loads(listed.stdout)["tasks"]
    assert task["task_id"] == outputs["task"] and task["status"] == "pending"
    assert task["due"].startswith("2026-11-24T08:00") and task["interval"] == "1 day"
    shown = cli(tmp_path, "tasks", "list")
    assert shown.returncode == 0 and outputs["task"] in shown.stdout
    threads = cli(tmp_path, "threads", "list", "--json")
    assert threads.returncode == 0, threads.stderr
    assert outputs["thread"] in threads.stdout
    assert not (tmp_path / ".chainlang" / "store.db").exists()  # nothing went to SQLite
    with open_store(tmp_path, pg_url) as store:
        assert [t.id for t in store.list_tasks()] == [outputs["task"]]
        assert store.get_thread(outputs["thread"]) is not None


def test_the_password_may_stay_out_of_the_url_in_pgpassword(pg_server: PgServer, tmp_path: Path,  # noqa: F811
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    url = pg_server.new_database().replace(f":{pg_server.password}@", "@")
    assert pg_server.password not in url
    monkeypatch.setenv("PGPASSWORD", pg_server.password)  # libpq reads it (and ~/.pgpass)
    with open_store(tmp_path, url) as store:
        assert store.claim_emit("k", "e", "r", "t").new
    monkeypatch.delenv("PGPASSWORD")
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    with pytest.raises(StoreError, match="PGPASSWORD"):
        open_store(tmp_path, url)


SERVED_HOOKS = """
events:
  order.placed:
    payload: {type: object, properties: {item: {type: string}}, required: [item]}
hooks:
  - id: every-order
    trigger: post:order.placed
    action:
      - user.notify: {message: "order of {item}"}
"""
REGISTER = """
steps:
  - task.register:
      id: big-orders
      trigger: post:order.placed
      condition: "item == 'piano'"
      action:
        - user.notify: {message: "a piano!"}
"""


def test_serve_runs_on_a_postgres_store_and_sees_hooks_stored_after_it_started(pg_url: str,  # noqa: F811
                                                                                 tmp_path: Path) -> None:
    from tests.serve_util import Servers

    (tmp_path / "chainlang.toml").write_text(f'[store]\nurl = "{pg_url}"\n', encoding="utf-8")
    (tmp_path / "orders.hooks.yaml").write_text(SERVED_HOOKS, encoding="utf-8")
    (tmp_path / "register.chain.yaml").write_text(REGISTER, encoding="utf-8")
    with Servers() as servers:
        server = servers.start(tmp_path)
        reply = server.post("/events/order.placed?wait=1", json={"item": "pen"})
        assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text
        assert [f["hook"] for f in reply.json()["fired"]] == ["every-order"]
        registered = cli(tmp_path, "run", "register.chain.yaml")  # a hook stored while serve runs
        assert registered.returncode == 0, registered.stdout + registered.stderr
        reply = server.post("/events/order.placed?wait=1", json={"item": "piano"})
        assert reply.status_code == 200, reply.text
        assert sorted(f["hook"] for f in reply.json()["fired"]) == ["big-orders", "every-order"], reply.text
        assert "Traceback" not in server.stderr
    assert not (tmp_path / ".chainlang" / "store.db").exists()
