"""`thread[EXPR].KEY` (LANGUAGE.md §3, §13), end to end through the CLI: a chain reads the
thread its input names and a named value of its own thread (`thread[run.thread].KEY`), a
chain written by the model (agent.chain) does the same, the checker types EXPR (a number
is an error, with the fix), and the run fails a step whose computed id names no thread,
naming the threads there are. (The engines' parity: tests/engines/thread-computed-id and
agent-reply.chain.yaml; the expression forms: tests/test_computed_index.py.)"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cli_here, show

NOW = "2026-11-23T10:00:00+00:00"
TOML = """\
[models.heavy]
provider = "scripted"
rules = "answers.yaml"
"""
RULES = """\
rules:
  - task: chain
    when: "read the analysis kept on this thread"
    answer: {chain: [{"agent.reply": {"message": "From this thread: {thread[run.thread].analysis.message}"}}]}
"""


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "chainlang.toml").write_text(TOML, encoding="utf-8")
    (tmp_path / "answers.yaml").write_text(RULES, encoding="utf-8")
    for thread, summary in (("compete-001", "Competitor pricing"), ("meet-001", "The team meeting")):
        made = cli_here(tmp_path, "threads", "create", thread, "--summary", summary)
        assert made.returncode == 0, show(made)
    return tmp_path


def write(project: Path, name: str, text: str) -> str:
    (project / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return name


def run(project: Path, name: str, *args: str, code: int = 0) -> Any:
    proc = cli_here(project, "run", name, "--json", "--progress", "plain", "--now", NOW, *args)
    assert proc.returncode == code, show(proc)
    return proc


ANALYSE = """\
steps:
  - id: analysis
    agent.reply: {message: "their prices rose 4%"}
"""


def test_a_chain_reads_the_thread_its_input_names_and_a_value_of_its_own_thread(project: Path) -> None:
    run(project, write(project, "analyse.chain.yaml", ANALYSE), "--thread", "compete-001")
    name = write(project, "recall.chain.yaml", """\
        inputs:
          thread_id: {type: string}
          other: {type: string, default: meet-001}
        steps:
          - agent.reply:
              message: >-
                {thread[inputs.thread_id].summary}: {thread[run.thread].analysis.message}
                (see also {thread[inputs.other].summary | lower})
        """)
    checked = cli_here(project, "check", name)
    assert checked.returncode == 0, show(checked)
    proc = run(project, name, "--input", "thread_id=compete-001")
    assert json.loads(proc.stdout) == {
        "reply": "Competitor pricing: their prices rose 4% (see also the team meeting)"}


def test_a_chain_the_model_writes_reads_its_own_thread(project: Path) -> None:
    run(project, write(project, "analyse.chain.yaml", ANALYSE), "--thread", "compete-001")
    name = write(project, "act.chain.yaml", """\
        inputs:
          thread_id: {type: string}
        steps:
          - agent.chain: {plan: "1. Read the analysis kept on this thread."}
        outputs:
          chain: "{agent.chain.chain}"
          said: "{agent.chain.result.result.message}"
        """)
    proc = run(project, name, "--input", "thread_id=compete-001")
    out = json.loads(proc.stdout)
    assert out["said"] == "From this thread: their prices rose 4%", show(proc)
    assert "reply: From this thread: their prices rose 4%" in proc.stderr.splitlines()


def test_the_checker_types_the_computed_id(project: Path) -> None:
    name = write(project, "bad.chain.yaml", """\
        inputs:
          n: {type: integer, default: 3}
          flag: {type: boolean, default: false}
        steps:
          - id: clock
            tools.now: {}
          - agent.reply: {message: "{thread[1].summary}"}
          - agent.reply: {message: "{thread[inputs.n].summary}"}
          - agent.reply: {message: "{thread[clock.hour].summary}"}
          - agent.reply: {message: "{thread[inputs.flag].summary}"}
          - agent.reply: {message: "{thread[clock.hour | string].summary}"}
          - agent.reply: {message: "{thread['meet-' + clock.weekday].summary}"}
        """)
    proc = cli_here(project, "check", "--format", "json", name)
    assert proc.returncode == 1, show(proc)
    found = [(d["line"], d["rule"], d["message"], d["hint"]) for d in json.loads(proc.stdout)]
    assert found == [
        (7, "CL027", "a thread id is text, not the number 1",
         "quote the id: thread['1'].KEY, or compute it: thread[EXPR].KEY with EXPR giving text"),
        (8, "CL027", "a thread id is text; inputs.n gives a number",
         "make it text: thread[inputs.n | string].KEY, or name the thread: thread['ID'].KEY"),
        (9, "CL027", "a thread id is text; clock.hour gives a number",
         "make it text: thread[clock.hour | string].KEY, or name the thread: thread['ID'].KEY"),
        (10, "CL027", "a thread id is text; inputs.flag gives a boolean",
         "make it text: thread[inputs.flag | string].KEY, or name the thread: thread['ID'].KEY"),
    ], found
    # the caret is on the id
    at = next(d for d in json.loads(proc.stdout) if d["line"] == 8)
    line = (project / name).read_text(encoding="utf-8").splitlines()[7]
    assert line[at["column"] - 1:at["end_column"] - 1] == "[inputs.n]", at


def test_a_computed_id_that_names_no_thread_fails_the_step_naming_the_threads(project: Path) -> None:
    name = write(project, "lost.chain.yaml", """\
        inputs:
          which: {type: string, default: compete-01}
        steps:
          - agent.reply: {message: "{thread[inputs.which].summary}"}
        """)
    proc = run(project, name, code=1)
    assert ("✗ 1 agent.reply failed: params (line 4): thread['compete-01'].summary: no thread 'compete-01' in the "
            "project's store (did you mean 'compete-001'?); the active threads are: ") in proc.stderr, show(proc)
    line = next(line for line in proc.stderr.splitlines() if line.startswith("✗ 1 agent.reply failed"))
    assert "compete-001" in line and "meet-001" in line
    # run.thread on a run attached to no thread: null, said so
    orphan = write(project, "orphan.chain.yaml", """\
        steps:
          - agent.reply: {message: "{thread[run.thread].summary}"}
        """)
    proc = run(project, orphan, code=1)
    assert ("thread[run.thread].summary: the thread id must be a non-empty string, got null (the run is attached "
            "to no thread: run it with --thread ID or an input thread_id)") in proc.stderr, show(proc)
