"""try/catch/finally, fail, switch and run.status/duration_ms/failures (LANGUAGE.md §2), end to
end through the CLI: what catch sees, how each block ends, and that `finally` runs on every
ending — after the run's limits.timeout (the issue's finding: an exit handler emulated with
on_error: continue was skipped, exit 3), after max_steps, and after an interruption, on resume.
The commands run in the test's own process (`cli_here`), the run the test interrupts in a
subprocess. Both engines: tests/engines/{try-catch-finally,fail,switch,try-finally-after-timeout}.chain.yaml.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import cli_here, show
from tests.test_run_cli import TOOLS, start_until, steps_of, stop, transcript, write_chain


def run(chain: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    return cli_here(chain.parent, "run", chain.name, "--tools", str(TOOLS), "--json", "--transcript", "run.jsonl",
                    *args)


def finished(records: list[dict[str, Any]], step: str) -> dict[str, Any]:
    found = steps_of(records, "step_finished", step)
    assert len(found) == 1, (step, found)
    return found[0]


def test_catch_sees_the_error_and_ends_the_block_ok(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, """\
        steps:
          - id: order
            try:
              - test.echo: {value: charged}
              - test.fail: {message: declined}
            catch:
              - if: "error.step == '2'"
                then: [test.echo: {value: refunded}]
              - test.echo: {value: "{error.type}|{error.message}|{error.step}|{error.path}|{error.event}"}
            finally:
              - id: audit
                test.echo: {value: "{run.status}/{run.failures | length}/{run.failures[0].path}"}
          - test.echo: {value: after}
        outputs:
          order: "{order.result}"
          status: "{order.status}"
          audit: "{audit.result}"
        """)
    proc = run(chain)
    assert proc.returncode == 0, show(proc)
    assert json.loads(proc.stdout) == {
        "order": "tool_error|RuntimeError: declined|2|1.try.2|test.fail", "status": "ok", "audit": "ok/1/1.try.2"}
    records = transcript(tmp_path / "run.jsonl")
    assert finished(records, "1.catch.1.then.1")["result"] == "refunded"
    assert records[-1]["status"] == "ok"


def test_a_fail_in_catch_fails_the_run_after_finally(tmp_path: Path) -> None:
    chain = write_chain(tmp_path, """\
        inputs:
          id: {type: string, default: A-7}
        steps:
          - try:
              - test.fail: {message: declined}
            catch:
              - fail: "order {inputs.id} could not be placed: {error.message}"
            finally:
              - test.echo: {value: "audit {run.status}"}
          - test.echo: {value: never}
        """)
    proc = run(chain)
    assert proc.returncode == 1, show(proc)
    records = transcript(tmp_path / "run.jsonl")
    assert finished(records, "1.finally.1")["result"] == "audit failed"
    assert not steps_of(records, "step_started", "2")
    end = records[-1]
    assert end["status"] == "failed"
    assert end["error"] == {"type": "fail", "message": "order A-7 could not be placed: RuntimeError: declined",
                            "step": "1.catch.1"}


def test_switch_picks_a_case_by_text_and_checks_an_enum(tmp_path: Path) -> None:
    tools = tmp_path / "review_tools.py"
    tools.write_text(
        "from chainlang import event\n\n"
        "@event('review.ask', description='A review', idempotent=True,\n"
        "       result={'type': 'object', 'properties': {'decision': {'type': 'string', 'enum': ['approve', 'edit']}}})\n"
        "def ask(answer: str) -> dict:\n    return {'decision': answer}\n", encoding="utf-8")
    chain = write_chain(tmp_path, """\
        steps:
          - review.ask: {answer: edit}
          - id: choice
            switch: "{review.ask.result.decision}"
            cases:
              approve: [test.echo: {value: shipped}]
              edit: [test.echo: {value: sent back}]
              rejct: [test.echo: {value: dropped}]
        outputs:
          choice: "{choice.result}"
        """)
    checked = cli_here(tmp_path, "check", chain.name, "--tools", str(tools), "--tools", str(TOOLS))
    assert checked.returncode == 1, show(checked)
    assert "case 'rejct' can never match: review.ask.result.decision is one of approve, edit" in checked.stdout
    assert "[CL054 switch-case-never]" in checked.stdout
    chain.write_text(chain.read_text(encoding="utf-8").replace("      rejct: [test.echo: {value: dropped}]\n", ""),
                     encoding="utf-8")
    proc = run(chain, "--tools", str(tools))
    assert proc.returncode == 0, show(proc)
    assert json.loads(proc.stdout) == {"choice": "sent back"}
    assert finished(transcript(tmp_path / "run.jsonl"), "2.case2.1")["result"] == "sent back"


def test_finally_runs_when_the_run_timeout_fires(tmp_path: Path) -> None:
    """The issue's finding: the exit handler did not run when limits.timeout fired."""
    chain = write_chain(tmp_path, """\
        limits: {timeout: 1s}
        steps:
          - try:
              - test.sleep: {seconds: 60}
            catch:
              - test.echo: {value: "never: a limit is not a failure to catch"}
            finally:
              - test.echo: {value: "cleanup after {run.status}"}
        """)
    proc = run(chain)
    assert proc.returncode == 3, show(proc)
    records = transcript(tmp_path / "run.jsonl")
    assert finished(records, "1.try.1")["status"] == "cancelled"
    assert finished(records, "1.finally.1")["result"] == "cleanup after limit"
    assert not steps_of(records, "step_started", "1.catch.1")
    assert records[-1]["status"] == "limit" and records[-1]["error"]["limit"] == "timeout"


def test_finally_runs_after_max_steps_within_its_grace(tmp_path: Path) -> None:
    """After a limit, the finally blocks share 100 more steps: a runaway finally is cut there."""
    chain = write_chain(tmp_path, """\
        limits: {max_steps: 2}
        steps:
          - try:
              - test.echo: {value: 1}
              - test.echo: {value: 2}
              - test.echo: {value: 3}
            finally:
              - test.echo: {value: "{run.status}"}
              - foreach: "[{range}]"
                test.echo: {value: "{item}"}
        """.replace("{range}", ", ".join(str(i) for i in range(150))))
    proc = run(chain)
    assert proc.returncode == 3, show(proc)
    records = transcript(tmp_path / "run.jsonl")
    assert finished(records, "1.finally.1")["result"] == "limit"
    assert not steps_of(records, "step_started", "1.try.3")
    started = {r["step"] for r in records if r["type"] == "step_started" and r["step"].startswith("1.finally.2[")}
    assert len(started) == 99  # 100 grace steps: finally.1 and 99 items; the 100th item is over the limit
    end = records[-1]
    assert end["status"] == "limit" and end["error"]["limit"] == "max_steps"


def test_an_interrupted_try_runs_its_finally_on_resume(tmp_path: Path, spawned: list["subprocess.Popen[str]"]) -> None:
    chain = write_chain(tmp_path, """\
        steps:
          - try:
              - test.echo: {value: first}
              - test.pid_once: {name: step.pid}
            finally:
              - id: cleanup
                test.echo: {value: "cleanup after {run.status}"}
        outputs:
          cleanup: "{cleanup.result}"
        """)
    proc = start_until(spawned, chain, tmp_path / ".chainlang" / "state" / "step.pid", "--transcript", "run.jsonl",
                       "--json")
    out, err = stop(proc, signal.SIGTERM)
    assert proc.returncode == 130, show(proc, out, err)
    records = transcript(tmp_path / "run.jsonl")
    assert records[-1]["status"] == "interrupted"
    assert not steps_of(records, "step_started", "1.finally.1")  # not while the process is being stopped

    resumed = cli_here(tmp_path, "resume", "run.jsonl", "--tools", str(TOOLS), "--json")
    assert resumed.returncode == 0, show(resumed)
    assert json.loads(resumed.stdout) == {"cleanup": "cleanup after ok"}
    records = transcript(tmp_path / "run.jsonl")
    assert len(steps_of(records, "step_started", "1.try.1")) == 1  # replayed, not run again
    assert finished(records, "1.finally.1")["result"] == "cleanup after ok"
    assert records[-1]["status"] == "ok"


def test_finally_after_a_failing_parallel_sibling(tmp_path: Path) -> None:
    """A branch cancelled because its sibling failed still runs its finally."""
    chain = write_chain(tmp_path, """\
        steps:
          - parallel:
              - try:
                  - test.sleep: {seconds: 60}
                finally:
                  - test.echo: {value: "released after {run.status}"}
              - test.fail: {message: sibling}
        """)
    proc = run(chain)
    assert proc.returncode == 1, show(proc)
    records = transcript(tmp_path / "run.jsonl")
    assert finished(records, "1.1.try.1")["status"] == "cancelled"
    assert finished(records, "1.1.finally.1")["result"] == "released after failed"
    assert records[-1]["error"]["message"] == "RuntimeError: sibling"


def test_the_editor_completes_the_keys_of_each_block() -> None:
    from chainlang.lsp.keys import step_keys

    assert {"try", "catch", "finally", "if", "timeout", "on_error"} <= set(step_keys({"try"}))
    assert {"switch", "cases", "default", "foreach"} <= set(step_keys({"switch"}))
    assert set(step_keys({"fail"})) == {"fail", "id", "if", "on_error", "description"}
