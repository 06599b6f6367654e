"""The six real-life use cases of seed 001, end to end, offline, through the CLI: the
example project examples/assistant (stand-in tools, a scripted model for the three tiers)
in a temporary copy, turn after turn, with the clock pinned.

docs/guides/assistant.md is the script. Each `## N.` section of the page is scenario N;
its ```text blocks are sessions: lines starting with `$ ` are commands (`chainlang ...`, or
`cat FILE`), run in the project in order, and the lines after a command are what it
prints (stdout and stderr together; the commands run in the test's process, through the
CLI's own entry point: `helpers.cli_here`). The section "The world" is run first, once, and every
scenario starts from a copy of the project it leaves. What changes from run to run is not
compared: durations, run ids, and the ids derived from them (threads and tasks:
`thread-0123456789ab`), which are matched by order of first appearance, so that a command
of the page naming a thread names the thread the run made; the lines of steps that run in
parallel are compared in any order. Beyond the page, each test asserts what the scenario
is about: the threads' events, the stored tasks, the files the tools wrote.

After a deliberate change, UPDATE_DOCS=1 (with -p no:xdist) rewrites the page's outputs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import helpers
from tests.helpers import records

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "assistant"
PAGE = ROOT / "docs" / "guides" / "assistant.md"
UPDATE = bool(os.environ.get("UPDATE_DOCS"))

_ID = re.compile(r"\b(?:thread|task)-[0-9a-f]{12}\b")
_DURATION = re.compile(r"\b\d+(?:\.\d+)? m?s\b")
_RUN_ID = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{6,10}\b")
_KEY = re.compile(r"\b[0-9a-f]{32}\b")  # a step attempt's idempotency key (made from the run id)
_QUESTION = re.compile(r"\bq-[0-9a-f]{16}\b")  # a user.ask's question id (made from the run id)
_DEADLINE = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\b")  # a wait's: the real clock's, not --now
_STEP = re.compile(r"^[✓✗] (\S+) ")
_OUTPUT = re.compile(r"^([a-z_]+): (.*)$")


# -- the page ---------------------------------------------------------------------------------


@dataclass
class Command:
    line: str  # as on the page, without the `$ `
    expected: str  # what the page says it prints


@dataclass
class Block:
    section: str
    start: int  # index of the opening fence's line
    end: int  # index of the closing fence's line
    commands: list[Command] = field(default_factory=list)


def read_page() -> list[Block]:
    lines = PAGE.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    section = ""
    i = 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i][3:].strip()
        if lines[i] == "```text" and i + 1 < len(lines) and lines[i + 1].startswith("$ "):
            end = lines.index("```", i + 1)
            block = Block(section, i, end)
            for line in lines[i + 1:end]:
                if line.startswith("$ "):
                    block.commands.append(Command(line[2:], ""))
                else:
                    block.commands[-1].expected += line + "\n"
            blocks.append(block)
            i = end
        i += 1
    return blocks


def section_blocks(prefix: str) -> list[Block]:
    found = [b for b in read_page() if b.section.startswith(prefix)]
    assert found, f"docs/guides/assistant.md has no section starting {prefix!r} with sessions"
    return found


def rewrite(blocks: list[Block], outputs: list[list[tuple[str, str]]]) -> None:
    """UPDATE_DOCS: the blocks' commands and outputs as they ran (found again by position)."""
    current = {b.start: b for b in read_page()}
    lines = PAGE.read_text(encoding="utf-8").split("\n")
    for block, ran in sorted(zip(blocks, outputs), key=lambda pair: -pair[0].start):
        assert block.start in current, "the page changed while it was being updated"
        body = [line for command, output in ran for line in [f"$ {command}"] + output.rstrip("\n").split("\n")]
        lines[block.start + 1:current[block.start].end] = body
    PAGE.write_text("\n".join(lines), encoding="utf-8")


# -- running a session ------------------------------------------------------------------------


# what a session printed, stdout and stderr in the order written (merged=False: apart)
cli = partial(helpers.cli_here, merged=True)


def _siblings(line: str) -> str | None:
    """The group of a step's line: the path without its last `.N` (`2/3.1` -> `2/3`)."""
    step = _STEP.match(line)
    if step is None:
        return None
    head, _, last = step.group(1).rpartition(".")
    return head if head and last.isdigit() else None


def comparable(text: str) -> str:
    """`text` without durations and run ids; the lines of sibling steps in one order (the
    steps of a parallel group end in any order)."""
    text = _QUESTION.sub("QUESTION", _DEADLINE.sub("DEADLINE", text))
    lines = _KEY.sub("KEY", _RUN_ID.sub("RUN_ID", _DURATION.sub("N", text))).rstrip("\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        group, j = _siblings(lines[i]), i + 1
        while group is not None and j < len(lines) and _siblings(lines[j]) == group:
            j += 1
        out.extend(sorted(lines[i:j]))
        i = j
    return "\n".join(out)


@dataclass
class Ran:
    command: str  # as run (ids of this run)
    output: str
    code: int  # the exit status

    @property
    def outputs(self) -> dict[str, Any]:
        """The chain's outputs, as `chainlang run` prints them after the run's last line."""
        found: dict[str, Any] = {}
        for line in self.output.split("\n"):
            match = _OUTPUT.match(line)
            if match:
                try:
                    found[match.group(1)] = json.loads(match.group(2))
                except ValueError:
                    pass
        return found

    @property
    def transcript(self) -> str:
        match = re.search(r"^transcript: (\S+)$", self.output, re.MULTILINE)
        assert match, self.output
        return match.group(1)


class Session:
    """The commands of some blocks of the page, run in `project`; ids mapped page -> run."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.page_ids: list[str] = []  # distinct ids of the page, by first appearance
        self.run_ids: list[str] = []  # distinct ids of the runs, by first appearance

    def mapped(self, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            if match.group(0) not in self.page_ids:
                self.page_ids.append(match.group(0))
            n = self.page_ids.index(match.group(0))
            return self.run_ids[n] if n < len(self.run_ids) else match.group(0)
        return _ID.sub(one, text)

    def run(self, blocks: list[Block]) -> list[Ran]:
        done: list[Ran] = []
        outputs: list[list[tuple[str, str]]] = []
        for block in blocks:
            outputs.append([])
            for command in block.commands:
                line = self.mapped(command.line)
                got, code = self.execute(line)
                for found in _ID.findall(got):
                    if found not in self.run_ids:
                        self.run_ids.append(found)
                expected = self.mapped(command.expected)
                done.append(Ran(line, got, code))
                outputs[-1].append((line, got))
                if not UPDATE:
                    assert comparable(got) == comparable(expected), (
                        f"docs/guides/assistant.md ({block.section}): `{line}` printed\n{got}")
        if UPDATE:
            rewrite(blocks, outputs)
        return done

    def execute(self, line: str) -> tuple[str, int]:
        words = shlex.split(line)
        if words[:1] == ["cat"] and len(words) == 2:
            return (self.project / words[1]).read_text(encoding="utf-8"), 0
        assert words[:1] == ["chainlang"], f"the page may run chainlang and cat, not `{line}`"
        proc = cli(self.project, *words[1:])
        return proc.stdout, proc.returncode


def copy_project(source: Path, target: Path, state: bool = True) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", *(() if state else (".chainlang",)))
    shutil.copytree(source, target, ignore=ignore)
    return target


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project after "The world" of the page: a week of journal, two tasks for today, the
    end-of-day routine, the thread about John's contract."""
    project = copy_project(EXAMPLE, tmp_path_factory.mktemp("world") / "assistant", state=False)
    ran = Session(project).run(section_blocks("The world"))
    assert [r.code for r in ran] == [0] * len(ran), ran
    return project


@pytest.fixture()
def project(world: Path, tmp_path: Path) -> Path:
    return copy_project(world, tmp_path / "assistant")


# -- what the runs left -----------------------------------------------------------------------


def thread(project: Path, thread_id: str) -> dict[str, Any]:
    proc = cli(project, "threads", "show", thread_id, "--json", merged=False)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def events(project: Path, thread_id: str, event: str) -> list[dict[str, Any]]:
    return [e for e in thread(project, thread_id)["events"] if e["event"] == event]


def tasks(project: Path) -> dict[str, dict[str, Any]]:
    proc = cli(project, "tasks", "list", "--json", merged=False)
    assert proc.returncode == 0, proc.stderr
    return {t["task_id"]: t for t in json.loads(proc.stdout)["tasks"]}


def steps_run(project: Path, transcript: str) -> list[str]:
    return [r["event"] for r in records(project, transcript) if r["type"] == "step_finished" and r["status"] == "ok"]


# -- the scenarios ----------------------------------------------------------------------------


def test_1_morning_routine_with_the_thread_switch(project: Path) -> None:
    first, switch, email, back, groceries, listed = Session(project).run(section_blocks("1."))
    morning = first.outputs["thread_id"]
    assert first.outputs["action"] == "new" and "09:00 standup" in first.outputs["reply"]
    assert [e["result"]["entries"][1]["title"] for e in events(project, morning, "calendar.check")] == [
        "Dentist appointment (Dr. Patel)"]
    listed = events(project, morning, "task.list")[0]["result"]["tasks"]
    assert [t["description"] for t in listed] == ["Review Q1 report", "Send invoice to Acme Corp"]
    # "Actually, first check if John replied": the thread about John fits better; the user switches
    assert switch.outputs == {"thread_id": "john-contract", "action": "suggest_switch", "reply": None,
                              "repairs": None, "reason": switch.outputs["reason"]}
    assert "'john'" in switch.outputs["reason"] and "'email'" in switch.outputs["reason"]
    assert email.outputs["action"] == "continue" and "clause 7" in email.outputs["reply"]
    [search] = events(project, "john-contract", "email.search")
    assert [m["id"] for m in search["result"]["matches"]] == ["m-222"]
    # "go back to my schedule": back to the morning thread, where the reminder is set
    assert back.outputs["action"] == "suggest_switch" and back.outputs["thread_id"] == morning
    assert groceries.outputs["thread_id"] == morning and groceries.outputs["action"] == "continue"
    reminder = [t for t in tasks(project).values() if t.get("description") == "Buy groceries"]
    assert len(reminder) == 1 and reminder[0]["due"] == "2026-11-19T17:00:00.000Z", reminder
    assert reminder[0]["action"] == [{"user.notify": {"message": "Time to buy groceries"}}]
    # each thread holds its own turns only
    assert not events(project, morning, "email.search")
    assert not events(project, "john-contract", "task.schedule")


def test_2_project_planning_and_the_checker_loop(project: Path) -> None:
    plan, meetings = Session(project).run(section_blocks("2."))
    launch = plan.outputs["thread_id"]
    assert plan.outputs["action"] == "new" and "engineering freeze March 18" in plan.outputs["reply"]
    searched = events(project, launch, "memory.search")
    found = [m["content"] for e in searched for m in e["result"]["matches"]]
    assert len(searched) == 2 and any(c.startswith("Atlas: Retrospective of the Atlas launch") for c in found)
    assert meetings.outputs["action"] == "continue" and meetings.outputs["thread_id"] == launch
    # the fast model's first chain was refused by the checker; the second one ran
    calls = [r for r in records(project, meetings.transcript) if r["type"] == "model_call"]
    assert [c["task"] for c in calls] == ["think", "chain", "repair", "think", "think"]
    assert "runs in parallel with this step" in calls[2]["request"]["messages"][-1]["content"]
    assert meetings.outputs["repairs"] == 1
    free = {e["result"]["people"][1]: e["result"]["free"] for e in events(project, launch, "calendar.availability")}
    assert sorted(free) == ["Maria Lopez", "Tom Fischer"]  # marketing's, engineering's (with Alex's)
    assert free["Maria Lopez"][:2] == ["2026-11-23 11:00-13:00", "2026-11-24 10:00-11:00"]
    assert "Thursday 26 November 12:00-15:00" in meetings.outputs["reply"]


def test_3_interrupted_flow_returns_to_results_that_persist(project: Path) -> None:
    summary, interrupt, dentist, back, resumed = Session(project).run(section_blocks("3."))
    meeting = summary.outputs["thread_id"]
    [search] = events(project, meeting, "memory.search")
    assert len(search["result"]["matches"]) == 3
    assert interrupt.outputs["action"] == "suggest_new" and interrupt.outputs["thread_id"] is None
    appointment = dentist.outputs["thread_id"]
    assert dentist.outputs["action"] == "new" and appointment != meeting and "12:30" in dentist.outputs["reply"]
    assert back.outputs == {"thread_id": meeting, "action": "suggest_switch", "reason": back.outputs["reason"],
                            "reply": None, "repairs": None}
    # back in the meeting thread: the answer comes from the results it holds; nothing runs again
    assert resumed.outputs["thread_id"] == meeting and "roadmap by Friday" in resumed.outputs["reply"]
    assert steps_run(project, resumed.transcript) == ["thread.match", "agent.think", "agent.reply", "assistant.turn",
                                                      "memory.append", "thread.summarize"]
    assert len(events(project, meeting, "memory.search")) == 1
    assert not events(project, appointment, "memory.search")


def test_4_research_and_a_presentation(project: Path) -> None:
    research, presentation, document = Session(project).run(section_blocks("4."))
    compete = research.outputs["thread_id"]
    assert [e["event"] for e in thread(project, compete)["events"]][3:7] == [
        "web.search", "memory.search", "memory.search", "agent.think"]
    [analysis] = [e for e in events(project, compete, "agent.think") if e.get("key") == "analysis"]
    assert "15%" in analysis["result"]["params"]["message"]
    assert presentation.outputs["action"] == "continue" and presentation.outputs["thread_id"] == compete
    path = project / ".chainlang" / "state" / "documents" / "competitive-pricing-analysis.md"
    assert document.output == path.read_text(encoding="utf-8")
    assert "Acme Corp cut every plan by 15%" in document.output
    [review] = [t for t in tasks(project).values() if t.get("description") == "Review the pricing presentation"]
    assert review["due"] == "2026-11-20T08:00:00.000Z"


def test_5_daily_journal_and_the_end_of_day_digest(project: Path) -> None:
    review, listed, digest = Session(project).run(section_blocks("5."))
    assert review.outputs["action"] == "new" and "invoice export bug" in review.outputs["reply"]
    [search] = events(project, review.outputs["thread_id"], "memory.search")
    assert {m["date"] for m in search["result"]["matches"]} == {"2026-11-17"} and len(search["result"]["matches"]) == 4
    routine = tasks(project)["end-of-day"]
    assert (routine["type"], routine["cron"], routine["due"]) == ("repeat", "0 18 * * *", "2026-11-19T18:00:00.000Z")
    assert routine["action"] == ["assistant.end_of_day"]
    # what serve runs at 18:00: the digest of the day, today's turn in it
    assert digest.outputs["entries"] == 1 and "Beacon" in digest.outputs["projects"]


def test_6_conditional_automation(project: Path) -> None:
    waiting, other, sarah, resumed, calendar = Session(project).run(section_blocks("6."))
    # the run waits for the email (no hook: a hook's action cannot wait), holding no process
    assert waiting.code == 4 and "waits at step 2.then.1/2.then.1/1 for email.received" in waiting.output
    transcript = project / ".chainlang" / "runs" / "sarah.jsonl"
    started = [r["event"] for r in records(transcript) if r["type"] == "wait_started"]
    assert started == ["email.received", "user.answered"]  # the email, then the question
    assert other.code == 0 and sarah.code == 0
    # the email is delivered to the run; the run asks before it books, and the answer is --answer's
    assert resumed.code == 0, resumed.output
    assert "Sarah emailed about the budget (Q1 budget): book a 30-minute meeting" in resumed.output
    waits = {r["step"]: r for r in records(transcript) if r["type"] == "wait_finished"}
    email, answer = waits["2.then.1/2.then.1/1"], waits["2.then.1/2.then.1/4"]
    assert (email["status"], email["payload"]["sender"]) == ("ok", "Sarah Lee <sarah@example.com>")
    assert (answer["status"], answer["payload"]["answer"], answer["payload"]["by"]) == ("ok", "book", "--answer")
    assert "decide: continue (the light model answered continue)" in resumed.output
    assert resumed.outputs["reply"].startswith("Done: Sarah emailed about the budget")
    [booking] = json.loads(calendar.output)
    assert (booking["title"], booking["start"], booking["attendees"]) == (
        "Budget Discussion", "2026-11-19T11:00+00:00", ["Alex Morgan", "Sarah Lee"])
    assert "sarah-budget" not in tasks(project)


# -- the project itself -----------------------------------------------------------------------


def test_the_example_checks_clean_and_so_does_its_parent(tmp_path: Path) -> None:
    assert cli(EXAMPLE, "check", ".").stdout.startswith("no problems found in ")
    # examples/ is a project too, and sees this one's files: it must still check, and its
    # Sarah hook (same event, its own payload) still fire
    parent = copy_project(EXAMPLE.parent, tmp_path / "examples", state=False)
    checked = cli(ROOT, "check", str(parent))
    assert checked.returncode == 0, checked.stdout
    fired = cli(parent, "emit", "email.received", "--data", '{"sender": "Sarah Lee", "subject": "Q1 budget review"}')
    assert fired.returncode == 0 and "1 hook fired" in fired.stdout, fired.stdout


def test_the_tools_that_write_do_it_once_per_step_attempt(tmp_path: Path) -> None:
    import importlib.util
    from datetime import datetime, timezone

    spec = importlib.util.spec_from_file_location("assistant_example_tools", EXAMPLE / "tools.py")
    assert spec is not None and spec.loader is not None
    tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tools)

    def ctx(key: str) -> Any:
        moment = datetime(2026, 11, 19, 10, 5, tzinfo=timezone.utc)
        return SimpleNamespace(idempotency_key=key, state_dir=tmp_path, now=lambda: moment)

    first = tools.calendar_create(title="Budget", attendees=["Sarah"], ctx=ctx("k1"))
    assert tools.calendar_create(title="Budget", attendees=["Sarah"], ctx=ctx("k1")) == first
    second = tools.calendar_create(title="Budget", attendees=["Sarah"], ctx=ctx("k2"))
    assert (first["start"], second["start"]) == ("2026-11-19T11:00+00:00", "2026-11-19T11:30+00:00")
    doc = tools.document_create(title="Notes", content="x", ctx=ctx("k1"))
    assert tools.document_create(title="Notes", content="y", ctx=ctx("k1")) == doc
    assert tools.document_create(title="Notes", content="z", ctx=ctx("k2"))["path"] == "documents/notes-2.md"
    assert (tmp_path / "documents" / "notes.md").read_text(encoding="utf-8").endswith("x\n")
    with pytest.raises(ValueError, match="no team 'sales'; the teams are: marketing, engineering, finance"):
        tools.team_members(team="sales")
