"""Deferred transcript lines (TranscriptWriter.defer_next), killed for real.

An idempotent step's step_started and step_finished may wait to share one write(2) with
later lines: losing them in a crash only makes the step run again. Every other line (a
non-idempotent step's, the run's) is written at once, with the lines that waited before it,
and the head moves before a non-idempotent tool acts. The test SIGKILLs `chainlang run` at
a moment when lines wait (tests/run/defer_tools.py: `d.die` kills its own process before the
event loop turns), then resumes: each side effect happened once, the run ends ok.
"""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path
from typing import Any

from tests.helpers import cli, records, records_so_far, show

TOOLS = Path(__file__).resolve().parent / "run" / "defer_tools.py"

CHAIN = """\
    steps:
      - foreach: [1, 2, 3, 4, 5]
        as: n
        steps:
          - {event: d.count, params: {n: "{n}"}}
      - {event: d.effect, params: {ref: a}}
      - {event: d.count, params: {n: 6}}
      - {event: d.count, params: {n: 7}}
      - d.die
      - {event: d.effect, params: {ref: b}}
    outputs:
      last: "{d.effect.result}"
    """


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def test_a_sigkill_loses_only_deferred_lines_and_the_resume_runs_each_effect_once(tmp_path: Path) -> None:
    (tmp_path / "main.chain.yaml").write_text(textwrap.dedent(CHAIN), encoding="utf-8")
    killed = cli(tmp_path, "run", "main.chain.yaml", "--tools", str(TOOLS), "--transcript", "run.jsonl")
    assert killed.returncode == -signal.SIGKILL, show(killed)
    state = tmp_path / ".chainlang" / "state"
    assert [e["ref"] for e in lines(state / "effects.jsonl")] == ["a"]

    before = records_so_far(tmp_path / "run.jsonl")
    started = [(r["type"], r["step"]) for r in before if r["type"] in ("step_started", "step_finished")]
    # the non-idempotent step is there, start and end (written at once, with what waited before it)
    assert ("step_started", "2") in started and ("step_finished", "2") in started, started
    # d.die's start waited, and the kill came before the event loop turned: it is not in the file
    assert ("step_started", "5") not in started, started

    resumed = cli(tmp_path, "resume", "run.jsonl", "--tools", str(TOOLS), "--json")
    assert resumed.returncode == 0, show(resumed)
    assert json.loads(resumed.stdout) == {"last": "b"}
    assert [e["ref"] for e in lines(state / "effects.jsonl")] == ["a", "b"]  # each effect once
    counted = [c["n"] for c in lines(state / "counts.jsonl")]
    assert sorted(set(counted)) == [1, 2, 3, 4, 5, 6, 7], counted  # idempotent steps may have run twice
    after = records(tmp_path / "run.jsonl")  # sealed, seq 1, 2, 3..., its last line whole
    assert after[-1]["type"] == "run_finished" and after[-1]["status"] == "ok", after[-1]



def _started(step: str) -> dict[str, Any]:
    return {"step": step, "event": "a.b", "attempt": 1, "params": {}}


def test_deferred_lines_wait_for_the_loop_to_turn_or_the_next_line(tmp_path: Path) -> None:
    import asyncio

    from chainlang.journal.jsonl import TranscriptWriter
    from chainlang.journal.reader import read_transcript

    path = tmp_path / "t.jsonl"

    def steps_in_file() -> list[str]:
        return list(read_transcript(path, key=b"k" * 32).steps)

    async def main() -> None:
        writer = TranscriptWriter(path, "r1", key=b"k" * 32)
        writer.write("run_started", chain="c.d", file="c.chain.yaml", file_sha256="ab" * 32, inputs={},
                 now=None, started_at="2025-01-02T03:04:05Z", tools=[], resumed=False)
        writer.defer_next()
        writer.write_checked("step_started", _started("1"))
        writer.defer_next()
        writer.write_checked("step_started", _started("2"))
        assert steps_in_file() == []  # they wait...
        await asyncio.sleep(0)
        assert steps_in_file() == ["1", "2"]  # ...until the event loop turns
        writer.defer_next()
        writer.write_checked("step_started", _started("3"))
        writer.write_checked("step_started", _started("4"))  # not deferred: 3 goes first, in its write
        assert steps_in_file() == ["1", "2", "3", "4"]
        writer.defer_next()
        writer.write_checked("step_started", _started("5"))
        writer.commit()  # before a non-idempotent tool acts: written, and the head moved
        assert steps_in_file() == ["1", "2", "3", "4", "5"]
        writer.defer_next()
        writer.write_checked("step_started", _started("6"))
        writer.close()
        assert steps_in_file() == ["1", "2", "3", "4", "5", "6"]

    asyncio.run(main())


def test_without_an_event_loop_a_deferred_line_is_written_at_once(tmp_path: Path) -> None:
    from chainlang.journal.jsonl import TranscriptWriter

    path = tmp_path / "t.jsonl"
    writer = TranscriptWriter(path, "r1", key=b"k" * 32)
    writer.write("run_started", chain="c.d", file="c.chain.yaml", file_sha256="ab" * 32, inputs={},
                 now=None, started_at="2025-01-02T03:04:05Z", tools=[], resumed=False)
    size = path.stat().st_size
    writer.defer_next()
    writer.write_checked("step_started", _started("1"))
    assert path.stat().st_size > size  # nothing would turn to write it later
    writer.close()
