"""The interpreter's semantics (LANGUAGE.md §2–§5, §8–§9), through the Python API.

Each test writes a chain, runs it with the test tools of tests/run/run_tools.py and
asserts the outcome, the transcript and the side effects (calls.jsonl in the state dir).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import chainlang
from chainlang.errors import UsageError
from chainlang.runtime.runner import RunResult
from tests.journal_util import cut_after

TOOLS = str(Path(__file__).parent / "run" / "run_tools.py")
NOW = "2026-01-05T10:00:00+00:00"  # a Monday


class Ran:
    def __init__(self, result: RunResult, root: Path) -> None:
        self.result = result
        self.root = root
        path = result.transcript
        self.records: list[dict[str, Any]] = (
            [json.loads(line) for line in path.read_text().splitlines()] if path and path.exists() else [])

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def outputs(self) -> dict[str, Any]:
        return self.result.outputs

    def finished(self, step: str) -> dict[str, Any]:
        found = [r for r in self.records if r["type"] == "step_finished" and r["step"] == step]
        assert found, f"step {step} did not finish: {[r.get('step') for r in self.records]}"
        return found[-1]

    def steps(self, type: str = "step_finished") -> list[str]:
        return [r["step"] for r in self.records if r["type"] == type]

    def calls(self) -> list[dict[str, Any]]:
        path = self.root / ".chainlang" / "state" / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run(tmp_path: Path, text: str, inputs: dict[str, Any] | None = None, name: str = "t.chain.yaml",
        **options: Any) -> Ran:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    options.setdefault("transcript", tmp_path / "run.jsonl")
    result = chainlang.run(path, inputs, tools=[TOOLS], now=NOW, **options)
    return Ran(result, tmp_path)


# -- sequence, references, native types -----------------------------------------------------


def test_sequence_references_and_native_types(tmp_path: Path) -> None:
    ran = run(tmp_path, """
inputs:
  n: {type: integer, default: 2}
  who: {type: string}
steps:
  - test.echo: {value: [1, 2]}
  - test.echo: {value: "{test.echo.result}"}           # most recent occurrence, native list
  - id: third
    test.echo: {value: "n={inputs.n} who={inputs.who}"}  # text
  - test.add: {a: "{inputs.n}", b: 40}
outputs:
  first: "{test.echo[0].result}"
  last: "{test.echo[-1].result}"
  second: "{test.echo[1].result[1]}"
  third: "{third.result}"
  sum: "{test.add.result}"
  status: "{third.status}"
  missing: "{test.echo[0].result[9]}"
""", {"who": "Ann"})
    assert ran.status == "ok", ran.result.error
    assert ran.outputs == {"first": [1, 2], "last": "n=2 who=Ann", "second": 2, "third": "n=2 who=Ann",
                           "sum": 42, "status": "ok", "missing": None}
    assert ran.steps() == ["1", "2", "3", "4"]


def test_shorthand_path_indexes_the_result(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - tools.now
  - test.echo: {value: "{tools.now.weekday} {tools.now.result.date}"}
outputs: {text: "{test.echo.result}"}
""")
    assert ran.outputs == {"text": "Monday 2026-01-05"}


# -- parallel groups ----------------------------------------------------------------------


def test_parallel_branches_run_concurrently_and_merge_in_order(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - parallel:
      - test.sleep: {seconds: 0.2, label: a}
      - test.sleep: {seconds: 0.1, label: b}
  - test.echo: {value: "{test.sleep.result}"}
outputs: {after: "{test.echo.result}", first: "{test.sleep[0].result}"}
""")
    assert ran.status == "ok"
    phases = [(c["label"], c["phase"]) for c in ran.calls() if c["event"] == "test.sleep"]
    assert phases[:2] == [("a", "start"), ("b", "start")]  # both started before either ended
    # the later branch in document order is "the most recent" after the group, whatever finished last
    assert ran.outputs == {"after": "b", "first": "a"}


def test_max_parallel_one_runs_branches_one_at_a_time(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - parallel:
      - test.sleep: {seconds: 0.01, label: a}
      - test.sleep: {seconds: 0.01, label: b}
      - test.sleep: {seconds: 0.01, label: c}
    max_parallel: 1
""")
    phases = [(c["label"], c["phase"]) for c in ran.calls()]
    assert phases == [("a", "start"), ("a", "end"), ("b", "start"), ("b", "end"), ("c", "start"), ("c", "end")]


def test_a_failing_branch_cancels_its_siblings(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - [test.fail, {test.sleep: {seconds: 30, label: slow}}]
  - test.echo: {value: never}
""")
    assert ran.status == "failed"
    assert ran.result.exit_code == 1
    assert ran.result.error is not None and ran.result.error["step"] == "1.1"
    assert ran.finished("1.2")["status"] == "cancelled"
    assert "3" not in ran.steps() and "2" not in ran.steps("step_started")
    assert ran.records[-1]["type"] == "run_finished" and ran.records[-1]["status"] == "failed"


def test_on_error_continue_in_a_branch_keeps_the_siblings(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - - test.fail: {message: oops}
      on_error: continue
    - test.sleep: {seconds: 0.05, label: done}
  - test.echo: {value: "{test.fail.status}: {test.fail.error.message}"}
outputs: {seen: "{test.echo.result}", slept: "{test.sleep.result}"}
""")
    assert ran.status == "ok"
    assert ran.outputs == {"seen": "failed: RuntimeError: oops", "slept": "done"}


# -- conditions, if/then/else, skipping ---------------------------------------------------


def test_if_skips_and_a_skipped_step_reads_as_null(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - id: maybe
    if: "1 > 2"
    test.echo: {value: skipped}
  - test.echo: {value: "{maybe.result}"}
outputs: {status: "{maybe.status}", value: "{test.echo.result}"}
""")
    assert ran.status == "ok"
    assert ran.finished("1")["status"] == "skipped"
    assert ran.outputs == {"status": "skipped", "value": None}


def test_a_skipped_occurrence_falls_back_to_the_one_that_ran(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - test.echo: {value: early}
  - if: "false"
    test.echo: {value: late}
  - test.add: {a: 1, b: 2}
outputs: {latest: "{test.echo.result}"}
""")
    assert ran.outputs == {"latest": "early"}


def test_if_then_else_takes_one_branch(tmp_path: Path) -> None:
    ran = run(tmp_path, """
inputs:
  n: {type: integer}
steps:
  - if: "inputs.n > 10"
    then:
      - test.echo: {value: big}
    else:
      - test.echo: {value: small}
      - test.echo: {value: "still {test.echo.result}"}
outputs: {said: "{test.echo.result}"}
""", {"n": 3})
    assert ran.outputs == {"said": "still small"}
    assert ran.steps() == ["1.else.1", "1.else.2"]


def test_steps_block_with_an_id_gives_its_last_result(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - id: block
    steps:
      - test.echo: {value: 1}
      - test.add: {a: "{test.echo.result}", b: 1}
outputs: {block: "{block.result}"}
""")
    assert ran.outputs == {"block": 2}


# -- foreach ------------------------------------------------------------------------------


def test_foreach_results_are_in_item_order(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - id: waits
    foreach: "[0.06, 0.01, 0.03]"
    as: s
    test.sleep: {seconds: "{s}", label: "L{s}"}
outputs: {labels: "{waits.result}", count: "{waits.result | length}"}
""")
    assert ran.status == "ok"
    assert ran.outputs == {"labels": ["L0.06", "L0.01", "L0.03"], "count": 3}
    assert sorted(ran.steps()) == ["1[0]", "1[1]", "1[2]"]


def test_foreach_block_runs_its_steps_per_item(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - id: each
    foreach: "[1, 2, 3]"
    max_parallel: 1
    steps:
      - test.add: {a: "{item}", b: 10}
      - test.echo: {value: "{test.add.result}"}
outputs: {all: "{each.result}"}
""")
    assert ran.outputs == {"all": [11, 12, 13]}
    assert ran.steps() == ["1[0].1", "1[0].2", "1[1].1", "1[1].2", "1[2].1", "1[2].2"]


def test_foreach_over_something_else_than_a_list_fails_clearly(tmp_path: Path) -> None:
    ran = run(tmp_path, """
inputs:
  items: {type: [array, string]}
steps:
  - foreach: "inputs.items"
    test.echo: {value: "{item}"}
""", {"items": "abc"})
    assert ran.status == "failed"
    assert "not a list" in ran.result.error["message"]  # type: ignore[index]


def test_foreach_on_error_continue_keeps_the_other_items(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - id: tries
    foreach: "[3, 1, 3]"
    on_error: continue
    test.flaky: {succeed_on: "{item}"}
outputs: {results: "{tries.result}", status: "{tries.status}"}
""")
    assert ran.status == "ok"
    assert ran.outputs == {"results": [None, 1, None], "status": "failed"}


# -- errors, break, retry, timeouts ---------------------------------------------------------


def test_on_error_break_stops_the_chain_cleanly(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - test.echo: {value: before}
  - test.fail: {message: stop here}
    on_error: break
  - test.echo: {value: after}
outputs: {last: "{test.echo.result}"}
""")
    assert ran.status == "broken"
    assert ran.result.exit_code == 0
    assert ran.outputs == {"last": "before"}
    assert "3" not in ran.steps("step_started")


def test_retry_runs_until_an_attempt_succeeds(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - test.flaky: {succeed_on: 3}
    retry: {attempts: 3, delay: 10ms, backoff: 2}
outputs: {attempt: "{test.flaky.result}"}
""")
    assert ran.status == "ok"
    assert ran.outputs == {"attempt": 3}
    assert [c["attempt"] for c in ran.calls()] == [1, 2, 3]
    finished = [r for r in ran.records if r["type"] == "step_finished"]
    assert [r["status"] for r in finished] == ["failed", "failed", "ok"]


def test_retry_gives_up_after_its_attempts(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - test.flaky: {succeed_on: 5}
    retry: {attempts: 2}
""")
    assert ran.status == "failed"
    assert ran.result.error["message"] == "attempt 2 failed"  # type: ignore[index]


def test_step_timeout_fails_the_step(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - test.sleep: {seconds: 30}
    timeout: 50ms
""")
    assert ran.status == "failed"
    assert ran.result.error["type"] == "timeout"  # type: ignore[index]


def test_run_timeout_is_a_limit(tmp_path: Path) -> None:
    ran = run(tmp_path, """
limits: {timeout: 100ms}
steps:
  - test.sleep: {seconds: 30}
""")
    assert ran.status == "limit"
    assert ran.result.exit_code == 3
    assert ran.result.error["limit"] == "timeout"  # type: ignore[index]
    assert ran.finished("1")["status"] == "cancelled"


def test_max_steps_is_a_limit(tmp_path: Path) -> None:
    ran = run(tmp_path, """
limits: {max_steps: 2}
steps: [test.echo, test.echo, test.echo]
""")
    assert ran.status == "limit"
    assert ran.result.error["limit"] == "max_steps"  # type: ignore[index]
    assert ran.steps() == ["1", "2"]


# -- results and tools ------------------------------------------------------------------------


def test_a_result_that_is_not_json_fails_clearly(tmp_path: Path) -> None:
    ran = run(tmp_path, "steps: [test.not_json]\n")
    assert ran.status == "failed"
    assert "not JSON" in ran.result.error["message"] and "['when']" in ran.result.error["message"]  # type: ignore[index]


def test_a_result_against_its_schema_fails(tmp_path: Path) -> None:
    ran = run(tmp_path, "steps: [test.wrong_result]\n")
    assert ran.status == "failed"
    assert ran.result.error["type"] == "result"  # type: ignore[index]
    assert "n: 'three' is not of type 'integer'" in ran.result.error["message"]  # type: ignore[index]


def test_progress_is_recorded(tmp_path: Path) -> None:
    ran = run(tmp_path, "steps: [test.progress]\n")
    progress = [(r["message"], r["fraction"]) for r in ran.records if r["type"] == "step_progress"]
    assert progress == [("half way", 0.5), ("done", 1.0)]


def test_the_idempotency_key_is_stable_per_attempt(tmp_path: Path) -> None:
    from chainlang.journal.jsonl import idempotency_key

    ran = run(tmp_path, "steps: [{test.send: {to: x}}]\n")
    run_id = ran.records[0]["run_id"]
    assert ran.calls()[0]["key"] == idempotency_key(run_id, "1", 1)


def test_clock_readings_are_recorded(tmp_path: Path) -> None:
    ran = run(tmp_path, "steps: [test.now]\n")
    clock = [r for r in ran.records if r["type"] == "clock"]
    assert [c["value"] for c in clock] == [NOW, NOW]
    assert ran.records[0]["now"] == NOW


# -- the decide model -----------------------------------------------------------------------


def test_invalid_params_are_repaired_by_the_embedded_decider(tmp_path: Path) -> None:
    ran = run(tmp_path, """
inputs:
  a: {type: string}
steps:
  - test.add: {a: "{inputs.a}", b: 1}
outputs: {sum: "{test.add.result}"}
""", {"a": "41"})
    assert ran.status == "ok", ran.result.error
    assert ran.outputs == {"sum": 42}
    decide = [r for r in ran.records if r["type"] == "decide"]
    assert len(decide) == 1 and decide[0]["action"] == "continue" and decide[0]["params"] == {"a": 41, "b": 1}
    assert decide[0]["asked"]["errors"]


def test_a_decide_expression_is_judged_without_a_model(tmp_path: Path) -> None:
    ran = run(tmp_path, """
inputs:
  n: {type: integer}
steps:
  - test.echo: {value: yes}
    decide: "inputs.n > 5"
""", {"n": 1})
    assert ran.status == "ok"
    assert ran.finished("1")["status"] == "skipped"
    decide = [r for r in ran.records if r["type"] == "decide"]
    assert decide[0]["action"] == "skip" and decide[0]["source"] == "embedded"


def test_a_natural_language_decide_needs_a_model(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - test.echo: {value: yes}
    decide: "only when the user looks busy"
""")
    assert ran.status == "failed"
    message = ran.result.error["message"]  # type: ignore[index]
    assert "a decide model is needed" in message and "chainlang.toml" in message


def test_a_decide_break_stops_the_chain(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('[decide]\nfallback = "break"\n')
    ran = run(tmp_path, """
steps:
  - test.echo: {value: 1}
  - test.echo: {value: 2}
    decide: "only when the user looks busy"
  - test.echo: {value: 3}
""")
    assert ran.status == "broken"
    assert ran.finished("2")["status"] == "skipped"
    assert "3" not in ran.steps()


# -- sub-chains, limits, allow ----------------------------------------------------------------


def test_named_chain_runs_as_a_sub_chain(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('chains = ["lib"]\n')
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "double.chain.yaml").write_text("""
chain: math.double
inputs:
  x: {type: integer}
steps:
  - test.add: {a: "{inputs.x}", b: "{inputs.x}"}
outputs: {value: "{test.add.result}"}
""")
    ran = run(tmp_path, """
steps:
  - math.double: {x: 4}
  - math.double: {x: "{math.double.value}"}
outputs: {value: "{math.double.value}"}
""")
    assert ran.status == "ok", ran.result.error
    assert ran.outputs == {"value": 16}
    assert ran.steps() == ["1/1", "1", "2/1", "2"]


def test_chain_run_runs_a_file_by_path(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "greet.chain.yaml").write_text("""
inputs:
  who: {type: string, default: world}
steps:
  - test.echo: {value: "hello {inputs.who}"}
outputs: {text: "{test.echo.result}"}
""")
    ran = run(tmp_path, """
steps:
  - chain.run: {path: sub/greet.chain.yaml, inputs: {who: Ann}}
  - chain.run: {path: sub/greet.chain.yaml}
outputs: {first: "{chain.run[0].text}", second: "{chain.run[1].text}"}
""")
    assert ran.status == "ok", ran.result.error
    assert ran.outputs == {"first": "hello Ann", "second": "hello world"}


def test_chain_run_stays_inside_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "outside.chain.yaml").write_text("steps: [test.echo]\n")
    ran = run(project, "steps:\n  - chain.run: {path: ../outside.chain.yaml}\n")
    assert ran.status == "failed"
    assert "outside the project" in ran.result.error["message"]  # type: ignore[index]


def test_recursion_stops_at_max_depth(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('chains = ["."]\n')
    ran = run(tmp_path, """
chain: loop.forever
limits: {max_depth: 3}
steps:
  - test.echo: {value: 1}
  - loop.forever
""", name="loop.chain.yaml")
    assert ran.status == "limit"
    assert ran.result.error["limit"] == "max_depth"  # type: ignore[index]
    assert ran.result.exit_code == 3


def test_allow_lists_are_intersected_for_sub_chains(tmp_path: Path) -> None:
    (tmp_path / "sub.chain.yaml").write_text("steps:\n  - test.send: {to: x}\n")
    ran = run(tmp_path, """
allow: [chain.run, test.echo]
steps:
  - chain.run: {path: sub.chain.yaml}
""")
    assert ran.status == "failed"
    assert "allow" in ran.result.error["message"]  # type: ignore[index]
    assert ran.calls() == []


def test_a_sub_chain_with_check_errors_fails_the_step(tmp_path: Path) -> None:
    (tmp_path / "bad.chain.yaml").write_text("steps:\n  - test.echo: {value: '{nope.result}'}\n")
    ran = run(tmp_path, "steps:\n  - chain.run: {path: bad.chain.yaml}\n")
    assert ran.status == "failed"
    assert "bad.chain.yaml:2:" in ran.result.error["message"]  # type: ignore[index]


# -- what does not start ------------------------------------------------------------------------


def test_a_chain_with_check_errors_does_not_start(tmp_path: Path) -> None:
    ran = run(tmp_path, "steps:\n  - test.echo: {value: '{nothing.here}'}\n")
    assert ran.status == "invalid"
    assert ran.result.exit_code == 1
    assert ran.result.diagnostics and not (tmp_path / "run.jsonl").exists()


def test_inputs_are_checked_before_the_run(tmp_path: Path) -> None:
    text = "inputs:\n  n: {type: integer}\nsteps: [test.echo]\n"
    # in the words of the Python API (the CLI says --input: tests/test_api_errors.py)
    with pytest.raises(UsageError, match=r"inputs\['n'\]: missing"):
        run(tmp_path, text)
    with pytest.raises(UsageError, match=r"inputs\['n'\]: 'x' is not of type 'integer'"):
        run(tmp_path, text, {"n": "x"})
    with pytest.raises(UsageError, match=r"inputs\['m'\]: the chain declares no such input"):
        run(tmp_path, text, {"n": 1, "m": 2})


# -- resume -------------------------------------------------------------------------------------


def _cut_after(transcript: Path, predicate: Any) -> None:
    """Keep the transcript up to and including the first record matching `predicate`
    (sealed again, as a crash there would have left it)."""
    cut_after(transcript, predicate)


def test_resume_does_not_rerun_finished_steps(tmp_path: Path) -> None:
    text = """
steps:
  - test.send: {to: a}
  - test.echo: {value: "{test.send.result.sent}"}
  - test.send: {to: "{test.echo.result}b"}
outputs: {sent: "{test.send.result}", first: "{test.send[0].result}"}
"""
    ran = run(tmp_path, text)
    assert ran.status == "ok"
    full_outputs = ran.outputs
    transcript = tmp_path / "run.jsonl"
    _cut_after(transcript, lambda r: r["type"] == "step_finished" and r["step"] == "2")
    (tmp_path / ".chainlang" / "state" / "calls.jsonl").unlink()
    resumed = chainlang.resume(transcript, tools=[TOOLS])
    assert resumed.status == "ok"
    assert resumed.outputs == full_outputs
    calls = Ran(resumed, tmp_path).calls()
    assert [(c["step"], c["event"]) for c in calls] == [("3", "test.send")]
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [r["type"] for r in records].count("run_started") == 2
    assert records[-1]["type"] == "run_finished"


def test_resume_stops_at_an_unfinished_non_idempotent_step(tmp_path: Path) -> None:
    text = "steps:\n  - test.echo: {value: 1}\n  - test.send: {to: a}\n  - test.echo: {value: 3}\n"
    run(tmp_path, text)
    transcript = tmp_path / "run.jsonl"
    _cut_after(transcript, lambda r: r["type"] == "step_started" and r["step"] == "2")
    blocked = chainlang.resume(transcript, tools=[TOOLS])
    assert blocked.status == "interrupted"
    assert blocked.error is not None and blocked.error["step"] == "2"
    assert "--rerun 2" in blocked.error["message"] and "--skip 2" in blocked.error["message"]
    again = chainlang.resume(transcript, tools=[TOOLS], skip=["2"])
    assert again.status == "ok"
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [r["status"] for r in records if r["type"] == "step_finished" and r["step"] == "2"] == ["skipped"]


def test_resume_reruns_an_unfinished_idempotent_step_with_the_same_key(tmp_path: Path) -> None:
    run(tmp_path, "steps:\n  - test.echo: {value: 1}\n  - test.flaky: {succeed_on: 1}\n")
    transcript = tmp_path / "run.jsonl"
    _cut_after(transcript, lambda r: r["type"] == "step_started" and r["step"] == "2")
    resumed = chainlang.resume(transcript, tools=[TOOLS])
    assert resumed.status == "ok"
    calls = [c for c in Ran(resumed, tmp_path).calls() if c["step"] == "2"]
    assert [c["attempt"] for c in calls] == [1, 1]  # the interrupted attempt, run again as attempt 1


def test_resume_reuses_the_recorded_clock_and_decisions(tmp_path: Path) -> None:
    text = """
inputs:
  a: {type: string}
steps:
  - test.now
  - test.add: {a: "{inputs.a}", b: 1}
  - test.echo: {value: "{test.now.result[0]}"}
outputs: {now: "{test.echo.result}", sum: "{test.add.result}"}
"""
    path = tmp_path / "t.chain.yaml"
    path.write_text(text)
    transcript = tmp_path / "run.jsonl"
    first = chainlang.run(path, {"a": "2"}, tools=[TOOLS], transcript=transcript)  # the system clock
    _cut_after(transcript, lambda r: r["type"] == "decide")
    resumed = chainlang.resume(transcript, tools=[TOOLS])
    assert resumed.outputs == first.outputs
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert [r["type"] for r in records].count("decide") == 1  # not asked again


def test_resume_refuses_a_changed_chain_file(tmp_path: Path) -> None:
    run(tmp_path, "steps:\n  - test.echo: {value: 1}\n  - test.echo: {value: 2}\n")
    transcript = tmp_path / "run.jsonl"
    _cut_after(transcript, lambda r: r["type"] == "step_finished")
    (tmp_path / "t.chain.yaml").write_text("steps:\n  - test.echo: {value: 9}\n")
    with pytest.raises(UsageError, match="changed since the run started"):
        chainlang.resume(transcript, tools=[TOOLS])


def test_resuming_a_finished_run_runs_nothing(tmp_path: Path) -> None:
    ran = run(tmp_path, "steps:\n  - test.send: {to: a}\noutputs: {x: '{test.send.result}'}\n")
    before = (tmp_path / "run.jsonl").read_text()
    again = chainlang.resume(tmp_path / "run.jsonl", tools=[TOOLS])
    assert again.status == "ok" and again.outputs == ran.outputs
    assert (tmp_path / "run.jsonl").read_text() == before


# -- the async API --------------------------------------------------------------------------


async def _run_async(path: Path, transcript: Path) -> RunResult:
    return await chainlang.run_async(path, {}, tools=[TOOLS], transcript=transcript, now=NOW)


def test_run_async_inside_a_running_loop(tmp_path: Path) -> None:
    import asyncio

    path = tmp_path / "t.chain.yaml"
    path.write_text("steps:\n  - test.echo: {value: 5}\noutputs: {v: '{test.echo.result}'}\n")
    result = asyncio.run(_run_async(path, tmp_path / "r.jsonl"))
    assert result.outputs == {"v": 5}


# -- malformed chains never start, and never crash the runner ------------------------------


ERR_CHAINS = sorted((Path(__file__).parent / "chains" / "err").glob("*.chain.y*ml"))


@pytest.mark.parametrize("path", ERR_CHAINS, ids=[p.name for p in ERR_CHAINS])
def test_every_error_golden_is_refused_before_it_runs(path: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "run.jsonl"
    try:
        result = chainlang.run(path, {}, tools=[TOOLS], transcript=transcript, now=NOW)
    except UsageError as exc:  # e.g. a hooks file, or inputs it needs
        assert str(exc) and "\n" not in str(exc)
        return
    assert result.status == "invalid", (path.name, result.status, result.error)
    assert result.diagnostics
    assert not transcript.exists()


# -- blocks: on_error, timeout; retry delays; break in a sub-chain ----------------------------------


def test_a_failing_block_with_on_error_continue_lets_the_chain_go_on(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - id: risky
    on_error: continue
    steps:
      - test.echo: {value: 1}
      - test.fail: {message: inner}
      - test.echo: {value: never}
  - test.echo: {value: "{risky.status}: {risky.error.message}"}
outputs: {said: "{test.echo.result}"}
""")
    assert ran.status == "ok"
    assert ran.outputs == {"said": "failed: RuntimeError: inner"}
    assert "1.3" not in ran.steps("step_started")


def test_a_block_timeout_cancels_what_runs_inside(tmp_path: Path) -> None:
    ran = run(tmp_path, """
steps:
  - timeout: 100ms
    on_error: continue
    steps:
      - test.sleep: {seconds: 30}
  - test.echo: {value: after}
""")
    assert ran.status == "ok"
    assert ran.finished("1.1")["status"] == "cancelled"
    assert ran.finished("2")["result"] == "after"


def test_retry_delays_grow_by_backoff_up_to_max_delay() -> None:
    from chainlang.model.nodes import Retry
    from chainlang.runtime.step import retry_delay as _delay

    retry = Retry(node=None, attempts=6, delay=1.0, backoff=2.0, max_delay=5.0)  # type: ignore[arg-type]
    assert [_delay(retry, n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    huge = Retry(node=None, attempts=3, delay=1.0, backoff=1e308, max_delay=None)  # type: ignore[arg-type]
    assert _delay(huge, 3) == 3600.0  # no overflow, and never more than an hour


def test_break_in_a_sub_chain_stops_only_the_sub_chain(tmp_path: Path) -> None:
    (tmp_path / "sub.chain.yaml").write_text("""
steps:
  - test.echo: {value: in sub}
  - test.fail: {}
    on_error: break
  - test.echo: {value: never}
outputs: {last: "{test.echo.result}"}
""")
    ran = run(tmp_path, """
steps:
  - chain.run: {path: sub.chain.yaml}
  - test.echo: {value: "after {chain.run.last}"}
outputs: {said: "{test.echo.result}"}
""")
    assert ran.status == "ok"
    assert ran.outputs == {"said": "after in sub"}
