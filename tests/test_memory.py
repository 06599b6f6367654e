"""memory.append, memory.search and memory.digest (LANGUAGE.md §13), the embedded defaults
that need no model, end to end through the CLI on a real store file: the journal kept on
the run's clock (`--now` pins it), BM25-ranked full-text search with type, scope and date
filters, secrets masked before anything is stored, a resumed step that appends once, the
digest grouping the journal into people and projects (again: updated, not duplicated),
and the errors of bad input. The lexical heuristics are unit-tested at the end."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli, cli_here

NOW = "2026-11-23T18:00:00+01:00"  # a Monday evening, in a zone east of UTC

MONDAY = [
    ("launch_001", "Met Sarah and John about the Q2 Product Launch. Sarah Chen wants the budget by Friday."),
    ("pricing_002", "Call with Acme Corp about pricing strategy. The Apollo project slipped; Sarah agreed."),
    ("home_003", "Booked the dentist for Thursday. Buy groceries after work."),
]

CRASH_TOOLS = '''\
import os
import signal
from pathlib import Path

from chainlang import event
from chainlang.store.memory import MemoryMethods

_appended = MemoryMethods.append_journal


def append_journal(self, *args, **kwargs):
    entry = _appended(self, *args, **kwargs)
    marker = Path(".chainlang") / "crash-after-append"
    if marker.exists():
        marker.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return entry


MemoryMethods.append_journal = append_journal


@event("crash.noop", description="Nothing", idempotent=True)
def noop() -> dict:
    return {}
'''


def run(project: Path, steps: str, *, outputs: str = "", now: str = NOW, name: str = "m.chain.yaml",
        ok: bool = True, killed: bool = False) -> subprocess.CompletedProcess[str]:
    """Write a chain of these steps (and outputs) and run it with the clock pinned: in this
    process, but for a run a tool kills (`killed`)."""
    text = "steps:\n" + textwrap.indent(textwrap.dedent(steps), "  ")
    if outputs:
        text += "outputs:\n" + textwrap.indent(textwrap.dedent(outputs), "  ")
    (project / name).write_text(text, encoding="utf-8")
    proc = (cli if killed else cli_here)(project, "run", name, "--now", now, "--json")
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def out(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(proc.stdout))


def append_all(project: Path, entries: list[tuple[str, str]], now: str = NOW) -> list[dict[str, Any]]:
    steps = "".join(f"- {{event: memory.append, id: a{i}, params: {{thread_id: {t}, content: {json.dumps(c)}}}}}\n"
                    for i, (t, c) in enumerate(entries))
    outputs = "".join(f'a{i}: "{{a{i}}}"\n' for i in range(len(entries)))
    got = out(run(project, steps, outputs=outputs, now=now, name="append.chain.yaml"))
    return [got[f"a{i}"] for i in range(len(entries))]


def search(project: Path, now: str = NOW, **params: Any) -> list[dict[str, Any]]:
    got = out(run(project, f"- memory.search: {json.dumps(params)}\n", outputs='s: "{memory.search}"\n', now=now,
                  name="search.chain.yaml"))
    return list(got["s"]["matches"])


def journal(project: Path) -> list[Any]:
    from chainlang.tasks.stored import project_store, store_exists

    if not store_exists(project):
        return []
    with project_store(project) as store:
        return store.journal()


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text("", encoding="utf-8")
    return tmp_path


def test_append_keeps_the_entry_on_the_runs_day_with_its_keywords(project: Path) -> None:
    first, second, third = append_all(project, MONDAY)
    assert first == {"id": 1, "thread_id": "launch_001", "date": "2026-11-23",
                     "keywords": ["sarah", "met", "john", "product", "launch", "chen", "wants", "budget"]}
    assert (second["id"], third["id"]) == (2, 3)
    rows = journal(project)
    assert [(r.thread_id, r.day, r.content) for r in rows] == [(t, "2026-11-23", c) for t, c in MONDAY]
    assert rows[0].at == "2026-11-23T17:00:00.000000+00:00"  # the run's clock, kept in UTC
    # the day is the run's date, not UTC's: 00:30 in +01:00 is still the evening before in UTC
    (late,) = append_all(project, [("late_004", "Late notes")], now="2026-11-24T00:30:00+01:00")
    assert late["date"] == "2026-11-24"
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        logged = [e for e in store.events() if e["kind"] == "journal_appended"]
    assert [e["subject"] for e in logged] == ["launch_001", "pricing_002", "home_003", "late_004"]


def test_search_ranks_by_bm25_and_filters_by_type(project: Path) -> None:
    append_all(project, MONDAY + [("launch_001", "Budget budget budget: the budget review is the budget meeting.")])
    found = search(project, query="budget")
    assert [m["thread_id"] for m in found] == ["launch_001", "launch_001"]
    assert found[0]["content"].startswith("Budget budget budget")  # the denser match first
    assert found[0]["score"] > found[1]["score"] > 0
    assert set(found[0]) == {"content", "type", "date", "thread_id", "keywords", "score"}
    assert found[0]["type"] == "journal" and found[0]["date"] == "2026-11-23"
    # any of the words; stemmed (porter): "groceries" finds "grocery"
    assert [m["thread_id"] for m in search(project, query="dentist grocery")] == ["home_003"]
    # words only, never FTS syntax
    assert search(project, query='Sarah" OR content:* NEAR(') != []
    (words,) = search(project, query="NOT AND OR")  # the words "not", "and", "or", not operators
    assert " and " in words["content"]
    assert search(project, query="budget", type="people") == []  # nothing digested yet
    # without a query: newest first
    listed = search(project, type="journal")
    assert [m["thread_id"] for m in listed] == ["launch_001", "home_003", "pricing_002", "launch_001"]
    assert all("score" not in m for m in listed)


def test_search_scope_and_date(project: Path) -> None:
    append_all(project, [("old", "Budget planning of October")], now="2026-10-01T09:00:00+00:00")
    append_all(project, [("tue", "Budget notes of last Tuesday")], now="2026-11-17T09:00:00+00:00")
    append_all(project, MONDAY[:1])
    assert {m["thread_id"] for m in search(project, query="budget")} == {"launch_001", "tue"}  # recent: 30 days
    assert len(search(project, query="budget", scope="all")) == 3
    assert [m["thread_id"] for m in search(project, query="budget", date="2026-11-17")] == ["tue"]
    # a date-time is read on the run's clock: 23:30 UTC of the 16th is the 17th in +01:00
    assert [m["thread_id"] for m in search(project, date="2026-11-16T23:30:00+00:00", type="journal")] == ["tue"]
    assert [m["thread_id"] for m in search(project, date={"start": "2026-09-28", "end": "2026-10-04"})] == ["old"]
    # the seed's journal review: tools.date_calc's "last Tuesday" as the date
    got = out(run(project, """\
        - tools.now
        - tools.date_calc: {from: "{tools.now}", find: last Tuesday, format: date}
        - memory.search: {type: journal, date: "{tools.date_calc}", scope: all}
        """, outputs='s: "{memory.search.matches}"\n'))
    assert [m["content"] for m in got["s"]] == ["Budget notes of last Tuesday"]


def test_secrets_are_masked_before_they_are_stored(project: Path) -> None:
    (entry,) = append_all(project, [("ops", "Rotated the key: password: hunter2 and token=ghp_abcdefghijklmnop1234")])
    (row,) = journal(project)
    assert "hunter2" not in row.content and "ghp_" not in row.content and row.content.count("***") == 2
    assert "hunter2" not in json.dumps(entry)
    raw = (project / ".chainlang" / "store.db").read_bytes()
    assert b"hunter2" not in raw and b"ghp_abcdefghijklmnop1234" not in raw


def test_bad_input_fails_the_step_with_a_clear_error(project: Path) -> None:
    empty = run(project, '- memory.search: {query: "  "}\n', ok=False)
    assert empty.returncode == 1 and "memory.search: the query is empty" in empty.stderr
    symbols = run(project, '- memory.search: {query: "?!"}\n', ok=False)
    assert symbols.returncode == 1 and "has no words to look for" in symbols.stderr
    bad_date = run(project, '- memory.search: {query: x, date: "next week"}\n', ok=False)
    assert bad_date.returncode == 1 and "is not a date (YYYY-MM-DD) or an ISO date-time" in bad_date.stderr
    backwards = run(project, '- memory.search: {date: {start: "2026-11-20", end: "2026-11-01"}}\n', ok=False)
    assert backwards.returncode == 1 and "date.start (2026-11-20) is after date.end (2026-11-01)" in backwards.stderr
    # no store yet: no matches, and none is created
    assert search(project, query="anything") == []
    assert not (project / ".chainlang" / "store.db").exists()


def test_a_step_run_again_after_a_crash_appends_once(project: Path) -> None:
    """SIGKILL right after the entry was committed, before the step's end was recorded:
    `chainlang resume` runs the step again, which finds its entry (same origin)."""
    (project / "crash_tools.py").write_text(CRASH_TOOLS, encoding="utf-8")
    (project / "chainlang.toml").write_text('tools = ["crash_tools.py"]\n', encoding="utf-8")
    (project / ".chainlang").mkdir()
    (project / ".chainlang" / "crash-after-append").write_text("", encoding="utf-8")
    crashed = run(project, '- memory.append: {thread_id: t1, content: "Remember the milk"}\n',
                  outputs='id: "{memory.append.id}"\n', ok=False, killed=True)
    assert crashed.returncode == -9, crashed.stderr
    (transcript,) = (project / ".chainlang" / "runs").glob("*.jsonl")
    # memory.yaml declares it idempotent (its entry is keyed by the attempt): resume runs it again;
    # in a process of its own as well: crash_tools.py patches MemoryMethods where it is loaded
    resumed = cli(project, "resume", str(transcript), "--json")  # same attempt, same key
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"id": 1}
    assert [r.content for r in journal(project)] == ["Remember the milk"]


def test_digest_groups_the_journal_into_people_and_projects(project: Path) -> None:
    append_all(project, [("old", "Lunch with Zoe about the Apollo project")], now="2026-11-20T12:00:00+01:00")
    append_all(project, MONDAY + [("ops", "Sarah sent the password: hunter2 for the Apollo staging box")])
    daily = out(run(project, "- memory.digest: {period: daily}\n", outputs='d: "{memory.digest}"\n'))["d"]
    assert daily["period"] == "daily" and (daily["start"], daily["end"]) == ("2026-11-23", "2026-11-23")
    assert daily["entries"] == 4
    assert daily["people"] == ["Sarah", "John", "Sarah Chen"]  # Zoe is of another day
    assert daily["projects"] == ["Q2 Product Launch", "Acme Corp", "Apollo"]
    from chainlang.tasks.stored import project_store

    with project_store(project) as store:
        items = {(i.kind, i.name): i for i in store.knowledge()}
    sarah = items[("people", "Sarah")]
    assert sarah.sources == [1 + 1, 2 + 1, 4 + 1]  # journal ids (the Friday entry is 1)
    assert "Sarah agreed" in sarah.content and "hunter2" not in sarah.content
    assert all("hunter2" not in i.content for i in items.values())
    # searchable: the knowledge, by name first
    found = search(project, query="Apollo", type="project")
    assert found[0]["content"].startswith("Apollo: ") and found[0]["type"] == "project"
    # weekly: the last 7 days; digesting again updates the items, never duplicates them
    weekly = out(run(project, "- memory.digest: {period: weekly}\n", outputs='d: "{memory.digest}"\n'))["d"]
    assert (weekly["start"], weekly["entries"]) == ("2026-11-17", 5)
    assert "Zoe" in weekly["people"]
    with project_store(project) as store:
        again = store.knowledge()
    assert len(again) == len({(i.kind, i.name) for i in again}) == len(items) + 1  # Zoe only
    apollo = next(i for i in again if i.name == "Apollo")
    assert apollo.sources == [1, 3, 5] and "Zoe" in apollo.content


def test_digest_of_an_empty_day(project: Path) -> None:
    got = out(run(project, "- memory.digest: {period: daily}\n", outputs='d: "{memory.digest}"\n'))
    assert got["d"] == {"period": "daily", "start": "2026-11-23", "end": "2026-11-23", "entries": 0, "people": [],
                        "projects": []}


def test_the_seeds_memory_chains_check_clean(project: Path) -> None:
    (project / "journal.chain.yaml").write_text(textwrap.dedent("""\
        inputs:
          thread_id: {type: string}
        steps:
          - tools.now
          - tools.date_calc: {from: "{tools.now}", find: last Tuesday}
          - memory.search: {type: journal, date: "{tools.date_calc}", scope: all}
          - memory.search: {type: project, query: product launch, scope: all}
          - memory.search: {query: team meeting, date: {start: "2026-11-16", end: "2026-11-22"}, type: journal}
          - memory.append: {thread_id: "{inputs.thread_id}", content: "Reviewed {memory.search.matches}"}
          - memory.digest: {period: daily}
        """), encoding="utf-8")
    proc = cli_here(project, "check", "journal.chain.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "error" not in proc.stdout.lower() + proc.stderr.lower()


# -- the lexical heuristics ------------------------------------------------------------------


def test_entities_tell_people_from_projects() -> None:
    from chainlang.stdlib.lexical import entities, mentions

    people, projects = entities([
        "Met Sarah and John about the Q2 Product Launch. Sarah Chen wants the budget by Friday.",
        "Call with Acme Corp. The Apollo project slipped. Then Priya took the CRM Migration on Monday.",
    ])
    assert people == ["Sarah", "John", "Sarah Chen", "Priya"]
    assert projects == ["Q2 Product Launch", "Acme Corp", "Apollo", "CRM Migration"]
    assert mentions(["Sarah left. Sarahs are many. SARAH came back!"], "Sarah") == ["Sarah left.", "SARAH came back!"]


def test_fts_query_quotes_every_word() -> None:
    from chainlang.store import StoreError
    from chainlang.store.memory import fts_query

    assert fts_query(["budget", 'a"b']) == '"budget" OR "a""b"'
    with pytest.raises(StoreError):
        fts_query([" "])
