"""How the progress views and the HTML report show a run that waits (LANGUAGE.md §15): the
wait_started and wait_finished records in every progress mode, and the wait as a bar of the
report (waiting, delivered, timed out, cancelled)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from chainlang.journal.records import Record, RunFinished, RunStarted, WaitFinished, WaitStarted
from chainlang.output.progress import PlainProgress, QuietProgress, RichProgress, make_progress
from chainlang.redaction import Redactor
from tests.helpers import cli_here, records, show
from tests.report_util import dom, island

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
QID = "q-0123456789abcdef"
HOSTILE = "evil\x1b[2J\rover\nwritten\u202egnp"
SECRET = "hunter2-secret-value"


def started() -> RunStarted:
    return RunStarted(chain="mail.approve", file="approve.chain.yaml", file_sha256="0" * 64, inputs={}, now=None,
                      started_at="2026-11-28T10:00:00+00:00", tools=[], resumed=False)


def waited() -> list[Record]:
    return [
        started(),
        WaitStarted("2", "approval.given", "draft_id == draft.id", {"draft.id": "d-1"}, "2026-11-30T10:00:00.000Z"),
        WaitFinished("2", "ok", {"draft_id": "d-1"}, "20261128T100000Z-4bf6b2a45d", "2026-11-28T10:00:05.000Z"),
        WaitStarted("4", "user.answered", "question_id == 'q'", {}, None,
                    {"id": QID, "question": "Send it?", "choices": ["yes", "no"]}),
        WaitFinished("4", "timed_out", None),
        WaitStarted("5", "approval.given", None, {}, None),
        WaitFinished("5", "cancelled", None),
        WaitFinished("9", "odd", None),  # a wait this view did not see begin (a resumed run)
        RunFinished("ok", {}, None, 12.0),
    ]


def test_the_plain_view_says_what_the_run_waits_for_and_how_each_wait_ended() -> None:
    out = io.StringIO()
    view = PlainProgress(out)
    for rec in waited():
        view.record(rec)
    view.close()
    lines = out.getvalue().splitlines()
    assert lines[1:8] == [
        '⧖ 2 waits for approval.given where draft_id == draft.id (draft.id = "d-1") until 2026-11-30T10:00:00.000Z',
        "✓ 2 approval.given delivered by emit 20261128T100000Z-4bf6b2a45d",
        f'⧖ 4 asks Send it? ["yes" / "no"] (question {QID} (no timeout))',
        f'  answer with: chainlang emit user.answered --data \'{{"question_id": "{QID}", "answer": "yes"}}\'',
        "✗ 4 user.ask timed out",
        "⧖ 5 waits for approval.given (no timeout)",
        "⊘ 5 approval.given cancelled",
    ]
    assert lines[8] == "• 9 wait odd"


def test_an_ascii_stream_gets_ascii_symbols() -> None:
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    view = PlainProgress(out)
    for rec in waited():
        view.record(rec)
    view.close()
    out.seek(0)
    text = out.read()
    assert "= 2 waits for approval.given" in text and "+ 2 approval.given delivered" in text


def test_quiet_shows_only_what_the_run_waits_for() -> None:
    out = io.StringIO()
    view = make_progress(out, "quiet")
    assert isinstance(view, QuietProgress)
    for rec in waited():
        view.record(rec)
    view.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4, lines  # nothing of how the waits ended, nor of the run
    assert lines[0].startswith("⧖ 2 waits for approval.given") and lines[1].startswith(f"⧖ 4 asks Send it?")
    assert lines[2].strip().startswith("answer with: chainlang emit user.answered") and lines[3].startswith("⧖ 5")


def test_the_rich_view_shows_the_wait_lines_and_a_row_while_it_waits() -> None:
    from rich.console import Console

    stream = io.StringIO()
    view = RichProgress(console=Console(file=stream, force_terminal=True, width=200, color_system=None),
                        refresh_per_second=50)
    records_ = waited()
    for rec in records_[:2]:
        view.record(rec)
    view._tick()
    assert "waits for approval.given" in ANSI.sub("", stream.getvalue())
    assert "2" in view._running and view._running["2"].event == "waits for approval.given"  # a row while it waits
    for rec in records_[2:]:
        view.record(rec)
    assert "2" not in view._running
    view.close()
    text = ANSI.sub("", stream.getvalue())
    for part in ("delivered by emit", f"question {QID}", "answer with: chainlang emit user.answered", "timed out",
                 "cancelled"):
        assert part in text, part


@pytest.mark.parametrize("mode", ["plain", "quiet", "rich"])
def test_hostile_and_secret_texts_of_a_wait_are_escaped_and_masked(mode: str) -> None:
    from rich.console import Console

    out = io.StringIO()
    if mode == "rich":
        view: Any = RichProgress(console=Console(file=out, force_terminal=True, width=400, color_system=None))
    else:
        view = make_progress(out, mode)  # type: ignore[arg-type]
    view.use_secrets(Redactor([SECRET]))
    view.record(started())
    view.record(WaitStarted(HOSTILE, HOSTILE, f"x == {SECRET}", {HOSTILE: SECRET, "n": [1, {"a": None}]},
                            HOSTILE, {"id": HOSTILE, "question": f"{HOSTILE} {SECRET}", "choices": [SECRET, 3]}))
    view.record(WaitStarted("3", "a.b", "x", "not a dict", 12, "not a dict"))  # type: ignore[arg-type]  # tolerated
    view.record(WaitFinished(HOSTILE, None, SECRET, SECRET))  # type: ignore[arg-type]
    view.close()
    text = out.getvalue()
    assert SECRET not in text and "\x1b[2J" not in text and "\u202e" not in text
    assert mode == "rich" or "\r" not in text  # rich's live display writes \r itself


def test_a_view_that_is_not_told_of_waits_still_runs(tmp_path: Path) -> None:
    """The default mode of a pipe is plain: a run that waits in it shows the wait (end to end)."""
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "ask.chain.yaml").write_text(
        'chain: mail.ask\nsteps:\n  - user.ask: {question: "Ship it?", choices: [yes, no], timeout: 1d}\n',
        encoding="utf-8")
    for mode in ("auto", "plain", "quiet", "rich"):
        proc = cli_here(tmp_path, "run", "ask.chain.yaml", "--detach", "--progress", mode, "--json")
        assert proc.returncode == 4, show(proc)
        assert "Ship it?" in proc.stderr and "chainlang emit user.answered --data" in proc.stderr, (mode, proc.stderr)
        assert json.loads(proc.stdout) == {}


# -- the report -------------------------------------------------------------------------------

APPROVE = """\
chain: mail.approve
events:
  approval.given:
    payload: {type: object, properties: {draft_id: {type: string}}, required: [draft_id]}
steps:
  - tools.now
  - wait: {event: approval.given, where: "draft_id == 'd-1'", timeout: 1d}
    id: approval
  - tools.now
"""


def _report(project: Path, transcript: str) -> Any:
    made = cli_here(project, "report", transcript, "-o", "-")
    assert made.returncode == 0, show(made)
    return dom(made.stdout)


def test_the_report_shows_a_wait_as_a_bar_waiting_then_delivered(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "approve.chain.yaml").write_text(APPROVE, encoding="utf-8")
    ran = cli_here(tmp_path, "run", "approve.chain.yaml", "--detach", "--transcript", "run.jsonl")
    assert ran.returncode == 4, show(ran)

    page = _report(tmp_path, "run.jsonl")
    assert page.one(id="run-status").all_text() == "waiting"
    note = page.one("p", class_="wait-note").all_text()
    assert "Waiting at step 2 for approval.given where draft_id == 'd-1', until " in note, note
    assert "chainlang waits show " in note and "chainlang resume run.jsonl" in note
    bar = page.one("button", class_="bar", data_step="2")
    assert "s-waiting" in bar.attrs["class"].split() and "wait approval.given" in bar.all_text()
    wait = [a for a in island(page)["attempts"] if a["step"] == "2"][0]
    assert wait["status"] == "waiting" and wait["params"]["where"] == "draft_id == 'd-1'"
    assert page.find_all(class_="g-event-name", data_path="2")[0].attrs["class"].split()[-1] == "s-waiting"

    emitted = cli_here(tmp_path, "emit", "approval.given", "--data", '{"draft_id": "d-1"}')
    assert emitted.returncode == 0, show(emitted)
    resumed = cli_here(tmp_path, "resume", "run.jsonl")
    assert resumed.returncode == 0, show(resumed)
    page = _report(tmp_path, "run.jsonl")
    assert page.one(id="run-status").all_text() == "ok" and not page.find_all("p", class_="wait-note")
    bar = page.one("button", class_="bar", data_step="2")
    assert "s-ok" in bar.attrs["class"].split(), bar.attrs  # one bar across the resume, not cut off at it
    wait = [a for a in island(page)["attempts"] if a["step"] == "2"][0]
    assert wait["result"] == {"draft_id": "d-1"} and wait["reason"].startswith("delivered by emit ")
    assert [r["type"] for r in records(tmp_path / "run.jsonl")].count("run_started") == 2


def test_the_report_shows_a_cancelled_and_a_timed_out_wait(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n', encoding="utf-8")
    (tmp_path / "approve.chain.yaml").write_text(APPROVE, encoding="utf-8")
    (tmp_path / "late.chain.yaml").write_text(APPROVE.replace("timeout: 1d", "timeout: 1s, on_timeout: continue"),
                                              encoding="utf-8")
    ran = cli_here(tmp_path, "run", "approve.chain.yaml", "--detach", "--transcript", "run.jsonl")
    assert ran.returncode == 4, show(ran)
    assert cli_here(tmp_path, "waits", "cancel", "run.jsonl").returncode == 0
    assert cli_here(tmp_path, "resume", "run.jsonl").returncode == 1
    page = _report(tmp_path, "run.jsonl")
    assert page.one(id="run-status").all_text() == "failed"
    assert "s-cancelled" in page.one("button", class_="bar", data_step="2").attrs["class"].split()

    late = cli_here(tmp_path, "run", "late.chain.yaml", "--transcript", "late.jsonl")
    assert late.returncode == 0, show(late)
    page = _report(tmp_path, "late.jsonl")
    assert "s-timed_out" in page.one("button", class_="bar", data_step="2").attrs["class"].split()
