"""A project opened once and its chains run many times, as an application uses them
(`chainlang.open_project`, `Project.chain`, `Chain.run`: LANGUAGE.md §11, "The Python API").

Each test builds a small project in `tmp_path` (a chainlang.toml naming a `chains`
directory, chain files, sometimes a hooks file) whose tools are the test's own functions,
given as objects; it drives the project through the public API only and asserts what
came back, the transcripts written and what the tools saw.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

import chainlang
from chainlang.errors import ConfigError, UsageError
from tests.journal_util import read_records, rewrite

CALLS: list[str] = []  # what app_greet saw (the test's module state: the tools share it)


def app_greet(who: str) -> str:
    """Greet someone (a plain typed function: the event app.greet)."""
    CALLS.append(who)
    return f"Hello, {who}!"


def app_send(to: str) -> dict[str, str]:
    """Send something (not idempotent: a resume does not run it twice)."""
    CALLS.append(f"sent:{to}")
    return {"sent": to}


GREET = """\
chainlang: 1
chain: app.welcome
inputs:
  who: {type: string}
steps:
  - app.greet: {who: "{inputs.who}"}
outputs:
  message: "{app.greet.result}"
"""


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def a_project(root: Path, **files: str) -> Path:
    """chainlang.toml (`chains = ["chains"]`), chains/welcome.chain.yaml and `files` (relative
    path → text)."""
    write(root, "chainlang.toml", 'chains = ["chains"]\n')
    write(root, "chains/welcome.chain.yaml", GREET)
    for name, text in files.items():
        write(root, name, text)
    return root


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


# -- load once, run many -------------------------------------------------------------------------


def test_a_named_chain_is_compiled_once_and_runs_many_times(tmp_path: Path) -> None:
    a_project(tmp_path)

    async def main() -> list[Any]:
        async with await chainlang.open_project(tmp_path, tools=[app_greet]) as project:
            chain = project.chain("app.welcome")
            assert project.chain("app.welcome") is chain  # the same Chain, not checked again
            assert chain.name == "app.welcome" and chain.file.name == "welcome.chain.yaml"
            assert set(chain.inputs) == {"who"}
            return [await chain.run({"who": who}) for who in ("Ada", "Grace", "Alan")]

    results = asyncio.run(main())
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert [r.outputs["message"] for r in results] == ["Hello, Ada!", "Hello, Grace!", "Hello, Alan!"]
    assert CALLS == ["Ada", "Grace", "Alan"]
    assert len({r.run_id for r in results}) == 3
    transcripts = [Path(str(r.transcript)) for r in results]
    assert len(set(transcripts)) == 3
    for result, transcript in zip(results, transcripts):
        assert transcript.parent == tmp_path / ".chainlang" / "runs"
        head = json.loads(transcript.read_text(encoding="utf-8").splitlines()[0])
        assert head["inputs"] == {"who": result.outputs["message"][7:-1]}


def test_the_sync_project_runs_a_chain_by_path(tmp_path: Path) -> None:
    a_project(tmp_path)
    with chainlang.open_project_sync(tmp_path, tools=[app_greet]) as project:
        chain = project.chain("chains/welcome.chain.yaml")
        assert chain.name == "app.welcome"
        first = chain.run_sync({"who": "Ada"})
        second = chain.run_sync({"who": "Bob"})
    assert (first.status, second.status) == ("ok", "ok")
    assert first.run_id != second.run_id
    assert CALLS == ["Ada", "Bob"]


def test_a_chain_from_text_runs_and_its_errors_are_chain_invalid(tmp_path: Path) -> None:
    a_project(tmp_path)
    from chainlang.errors import ChainInvalid

    with chainlang.open_project_sync(tmp_path, tools=[app_greet]) as project:
        chain = project.chain_from_text(GREET.replace("app.welcome", "app.written"), name="written")
        assert chain.run_sync({"who": "Eve"}).outputs == {"message": "Hello, Eve!"}
        with pytest.raises(ChainInvalid) as raised:
            project.chain_from_text("chainlang: 1\nsteps:\n  - app.nosuch: {x: 1}\n", name="bad")
    diagnostics = raised.value.diagnostics
    assert diagnostics and any(d.severity == "error" and "app.nosuch" in d.message for d in diagnostics)
    assert diagnostics[0].line == 3  # positioned in the text
    assert CALLS == ["Eve"]


def test_a_chain_file_with_errors_is_chain_invalid_naming_the_problem(tmp_path: Path) -> None:
    a_project(tmp_path, **{"chains/broken.chain.yaml": "chainlang: 1\nchain: app.broken\nsteps:\n"
                           "  - app.greet: {nobody: 1}\n"})
    from chainlang.errors import ChainInvalid

    with chainlang.open_project_sync(tmp_path, tools=[app_greet]) as project:
        with pytest.raises(ChainInvalid) as raised:
            project.chain("app.broken")
        assert project.chain("app.welcome").run_sync({"who": "x"}).status == "ok"  # the others still run
    assert raised.value.diagnostics
    assert "broken.chain.yaml" in str(raised.value)


def test_a_chain_asked_for_by_name_and_by_path_is_one_chain(tmp_path: Path) -> None:
    a_project(tmp_path)
    with chainlang.open_project_sync(tmp_path, tools=[app_greet]) as project:
        by_path = project.chain("chains/welcome.chain.yaml")
        assert project.chain("app.welcome") is by_path
        assert project.chain(tmp_path / "chains" / "welcome.chain.yaml") is by_path


def test_a_missing_chain_names_the_projects_chains(tmp_path: Path) -> None:
    a_project(tmp_path, **{"chains/other.chain.yaml": GREET.replace("app.welcome", "app.other")})
    with chainlang.open_project_sync(tmp_path, tools=[app_greet]) as project:
        with pytest.raises(UsageError) as raised:
            project.chain("app.welcom")
        with pytest.raises(UsageError) as by_path:
            project.chain("chains/nosuch.chain.yaml")
    message = str(raised.value)
    assert "'app.welcom'" in message and "app.other, app.welcome" in message
    assert "nosuch.chain.yaml" in str(by_path.value) and "no such chain file" in str(by_path.value)


def test_a_closed_project_refuses(tmp_path: Path) -> None:
    a_project(tmp_path)

    async def main() -> None:
        async with await chainlang.open_project(tmp_path, tools=[app_greet]) as project:
            chain = project.chain("app.welcome")
        for attempt in (lambda: project.chain("app.welcome"), lambda: project.chain_from_text(GREET),
                        lambda: chain.run({"who": "x"}), lambda: project.emit("x.y", {}),
                        lambda: project.resume_run("r.jsonl"), project.reload):
            with pytest.raises(UsageError, match="the project is closed"):
                made = attempt()
                if asyncio.iscoroutine(made):
                    await made

    asyncio.run(main())
    assert CALLS == []


def test_reload_sees_a_changed_chain_file(tmp_path: Path) -> None:
    a_project(tmp_path)
    with chainlang.open_project_sync(tmp_path, tools=[app_greet]) as project:
        before = project.chain("app.welcome")
        write(tmp_path, "chains/welcome.chain.yaml", GREET.replace('"{app.greet.result}"', '"changed"'))
        assert project.chain("app.welcome").run_sync({"who": "a"}).outputs == {"message": "Hello, a!"}  # cached
        project.reload()
        after = project.chain("app.welcome")
        assert after is not before
        assert after.run_sync({"who": "b"}).outputs == {"message": "changed"}


def test_models_with_a_bad_key_is_a_config_error_naming_it(tmp_path: Path) -> None:
    a_project(tmp_path)
    with pytest.raises(ConfigError) as raised:
        chainlang.open_project_sync(tmp_path, tools=[app_greet], models={"hevy": {"model": "x"}})
    assert "hevy" in str(raised.value) and "models=" in str(raised.value)


def test_models_that_is_not_a_table_is_a_config_error(tmp_path: Path) -> None:
    a_project(tmp_path)
    with pytest.raises(ConfigError, match=r"models= takes a dict .* not list"):
        chainlang.open_project_sync(tmp_path, models=["heavy"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"models= takes a dict .* not str"):
        asyncio.run(chainlang.open_project(tmp_path, models="heavy"))  # type: ignore[arg-type]


def test_transcripts_go_to_the_directory_given(tmp_path: Path) -> None:
    a_project(tmp_path)
    elsewhere = tmp_path / "elsewhere" / "runs"
    with chainlang.open_project_sync(tmp_path, tools=[app_greet], transcripts=elsewhere) as project:
        result = project.chain("app.welcome").run_sync({"who": "a"})
    assert result.status == "ok"
    assert Path(str(result.transcript)).parent == elsewhere
    with chainlang.open_project_sync(tmp_path / "chains", tools=[app_greet], transcripts="kept/runs") as project:
        relative = project.chain("app.welcome").run_sync({"who": "b"})  # relative to the project, not the cwd
    assert Path(str(relative.transcript)).parent == tmp_path / "kept" / "runs"
    assert not (tmp_path / ".chainlang" / "runs").exists() or not list((tmp_path / ".chainlang" / "runs").iterdir())


# -- hooks and emits -----------------------------------------------------------------------------

HOOKS = """\
events:
  email.received:
    description: A message arrived.
    payload:
      type: object
      properties: {sender: {type: string}}
      required: [sender]
hooks:
  - id: greet-sender
    trigger: post:email.received
    action:
      - app.greet: {who: "{sender}"}
  - id: after-greet
    trigger: post:app.greet
    condition: event.params.who == 'Ada'
    action:
      - app.send: {to: "hook saw {event.params.who}"}
"""


def test_emit_through_the_project_runs_its_hooks_with_the_callers_tools(tmp_path: Path) -> None:
    a_project(tmp_path, **{"inbox.hooks.yaml": HOOKS})

    async def main() -> tuple[Any, Any]:
        async with await chainlang.open_project(tmp_path, tools=[app_greet, app_send]) as project:
            first = await project.emit("email.received", {"sender": "Sarah"}, id="msg-1")
            return first, await project.emit("email.received", {"sender": "Sarah"}, id="msg-1")

    result, again = asyncio.run(main())
    assert result.status == "ok", result
    assert [hook["hook"] for hook in result.fired] == ["greet-sender"]
    assert again.status == "duplicate" and again.previous is not None
    assert again.previous["run_id"] == result.run_id
    assert CALLS == ["Sarah"]  # the hook's action called app_greet, once: the same id is not fired again


def test_emit_without_data_is_an_empty_payload(tmp_path: Path) -> None:
    a_project(tmp_path, **{"nudge.hooks.yaml": """\
        events:
          app.nudged:
            description: Someone nudged the app.
            payload: {type: object, properties: {who: {type: string}}}
        hooks:
          - id: on-nudge
            trigger: post:app.nudged
            action:
              - app.greet: {who: nudger}
        """})
    with chainlang.open_project_sync(tmp_path, tools=[app_greet]) as project:
        result = project.emit_sync("app.nudged")
    assert result.status == "ok", result.errors
    assert CALLS == ["nudger"]


def test_the_projects_hooks_files_apply_to_chain_runs(tmp_path: Path) -> None:
    a_project(tmp_path, **{"inbox.hooks.yaml": HOOKS})
    with chainlang.open_project_sync(tmp_path, tools=[app_greet, app_send]) as project:
        chain = project.chain("app.welcome")
        ada = chain.run_sync({"who": "Ada"})
        bob = chain.run_sync({"who": "Bob"})
    assert (ada.status, bob.status) == ("ok", "ok")
    assert CALLS == ["Ada", "sent:hook saw Ada", "Bob"]


# -- resumes -------------------------------------------------------------------------------------

SEND_TWICE = """\
chainlang: 1
chain: app.twice
steps:
  - app.greet: {who: first}
  - app.send: {to: a}
  - app.greet: {who: last}
outputs: {last: "{app.greet.result}"}
"""


def test_resume_run_continues_an_interrupted_run_and_resume_emit_refuses_it(tmp_path: Path) -> None:
    a_project(tmp_path, **{"chains/twice.chain.yaml": SEND_TWICE})
    with chainlang.open_project_sync(tmp_path, tools=[app_greet, app_send]) as project:
        ran = project.chain("app.twice").run_sync()
        assert ran.status == "ok"
        transcript = Path(str(ran.transcript))
        records = read_records(transcript)  # as a crash after step 2 leaves it, sealed with the project's key
        end = next(i for i, r in enumerate(records) if r["type"] == "step_finished" and r["step"] == "2")
        rewrite(transcript, records[: end + 1], tmp_path)
        CALLS.clear()
        cut = transcript.read_bytes()
        with pytest.raises(UsageError) as refused:
            asyncio.run(project.resume_emit(transcript))
        with pytest.raises(UsageError) as one_shot_refused:
            chainlang.resume_emit(transcript, tools=[app_greet, app_send])
        assert CALLS == [] and transcript.read_bytes() == cut  # refused before anything ran
        resumed = project.resume_run_sync(transcript)
    assert "transcript of a run" in str(refused.value) and "project.resume_run()" in str(refused.value)
    assert "transcript of a run" in str(one_shot_refused.value) and "resume_run()" in str(one_shot_refused.value)
    assert resumed.status == "ok" and resumed.outputs == {"last": "Hello, last!"}
    assert CALLS == ["last"]  # steps 1 and 2 finished before: not run again


# -- the loop is not blocked ---------------------------------------------------------------------


def test_opening_reads_the_project_off_the_callers_loop(tmp_path: Path) -> None:
    a_project(tmp_path)
    write(tmp_path, "slow_tools_e26.py", """\
        import time

        import chainlang

        time.sleep(0.3)  # a tools module slow to import


        @chainlang.event("slow.ping")
        def ping() -> str:
            return "pong"
        """)
    write(tmp_path, "chainlang.toml", 'chains = ["chains"]\ntools = ["slow_tools_e26.py"]\n')

    async def main() -> tuple[int, int]:
        ticks = 0
        stop = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        beat = asyncio.create_task(heartbeat())
        await asyncio.sleep(0)
        at_start = ticks
        opening = asyncio.create_task(chainlang.open_project(tmp_path, tools=[app_greet]))
        project = await opening
        during = ticks - at_start
        stop.set()
        await beat
        async with project:
            assert "slow.ping" in project.registry
        return at_start, during

    _, during = asyncio.run(main())
    # a blocking open lets at most one tick through (the one due when it returns): two prove the loop ran meanwhile
    assert during >= 2, "the loop's heartbeat did not tick while the project was being opened"


def test_twenty_concurrent_runs_of_one_chain(tmp_path: Path) -> None:
    a_project(tmp_path)

    async def main() -> list[Any]:
        async with await chainlang.open_project(tmp_path, tools=[app_greet]) as project:
            chain = project.chain("app.welcome")
            return list(await asyncio.gather(*(chain.run({"who": f"p{n}"}) for n in range(20))))

    results = asyncio.run(main())
    assert [r.status for r in results] == ["ok"] * 20
    assert [r.outputs["message"] for r in results] == [f"Hello, p{n}!" for n in range(20)]
    assert len({r.run_id for r in results}) == 20
    assert len({str(r.transcript) for r in results}) == 20
    assert sorted(CALLS) == sorted(f"p{n}" for n in range(20))


# -- keyword-only signatures ---------------------------------------------------------------------


def test_misspelt_keywords_are_type_errors(tmp_path: Path) -> None:
    a_project(tmp_path)
    chain_file = tmp_path / "chains" / "welcome.chain.yaml"
    with pytest.raises(TypeError):
        chainlang.open_project_sync(tmp_path, tool=[app_greet])  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        chainlang.open_project_sync(tmp_path, [app_greet])  # type: ignore[misc]
    with pytest.raises(TypeError):
        chainlang.run(chain_file, input={"who": "x"}, tools=[app_greet])  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        chainlang.run(chain_file, {"who": "x"}, [app_greet])  # type: ignore[misc]
    with pytest.raises(TypeError):
        chainlang.emit("email.received", {}, str(tmp_path))  # type: ignore[misc]
    with chainlang.open_project_sync(tmp_path, tools=[app_greet]) as project:
        chain = project.chain("app.welcome")
        with pytest.raises(TypeError):
            chain.run_sync({"who": "x"}, "2026-01-01T00:00:00Z")  # type: ignore[misc]
        with pytest.raises(TypeError):
            asyncio.run(chain.run({"who": "x"}, raise_on_fail=True))  # type: ignore[call-arg]
    assert CALLS == []



def test_transcripts_in_memory_write_no_file_and_hold_the_same_records(tmp_path: Path) -> None:
    root = a_project(tmp_path)

    async def main() -> tuple[Any, Any]:
        async with await chainlang.open_project(root, tools=[app_greet]) as on_disk:
            written = await on_disk.chain("app.welcome").run({"who": "Ada"})
        async with await chainlang.open_project(root, tools=[app_greet], transcripts="memory") as project:
            chain = project.chain("app.welcome")
            kept = await chain.run({"who": "Ada"})
            with pytest.raises(UsageError, match="kept in memory cannot"):
                await chain.run({"who": "Ada"}, detach=True)
        return written, kept

    written, kept = asyncio.run(main())
    assert kept.status == "ok" and kept.outputs == {"message": "Hello, Ada!"}
    assert kept.transcript is None
    on_file = read_records(written.transcript)
    assert [r["type"] for r in kept.records] == [r["type"] for r in on_file]
    assert all(r["run_id"] == kept.run_id and "mac" in r for r in kept.records)
    assert [p.name for p in (root / ".chainlang" / "runs").glob("*.jsonl")] == [written.transcript.name]


def test_keep_removes_the_oldest_ended_runs_when_the_project_closes(tmp_path: Path) -> None:
    import os

    root = a_project(tmp_path)
    with chainlang.open_project_sync(root, tools=[app_greet], keep=2) as project:
        results = [project.chain("app.welcome").run_sync({"who": f"n{i}"}) for i in range(4)]
        for age, result in enumerate(reversed(results)):  # distinct mtimes, the first run the oldest
            os.utime(result.transcript, (1_000_000 - age * 100, 1_000_000 - age * 100))
    left = sorted(p.name for p in (root / ".chainlang" / "runs").iterdir())
    assert left == sorted([f"{r.run_id}.jsonl" for r in results[2:]] + [f"{r.run_id}.jsonl.head" for r in results[2:]])
    with pytest.raises(UsageError, match="keep"):
        chainlang.open_project_sync(root, tools=[app_greet], keep="soon")
