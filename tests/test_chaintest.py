"""The pytest plugin (chainlang.testing), driven as its users drive it: a project with
`*.chaintest.yaml` files and Python tests, run by pytest (pytester), passing and failing."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

TOOLS = '''
from chainlang import event


@event("shop.price", params={"type": "object", "properties": {"item": {"type": "string"}},
                             "required": ["item"], "additionalProperties": False},
       result={"type": "object", "properties": {"price": {"type": "number"}}, "required": ["price"]})
def price(item):
    raise RuntimeError("the real shop is not reachable from a test")
'''

CHAIN = '''
chainlang: 1
chain: shop.quote
inputs:
  item: {type: string}
steps:
  - shop.price: {item: "{inputs.item}"}
outputs:
  price: "{shop.price.price}"
'''

THINK = '''
chainlang: 1
chain: shop.advice
steps:
  - agent.think: {thread_id: t1, prompt: "Is it a good time to buy?"}
outputs:
  answer: "{agent.think}"
'''


@pytest.fixture
def shop(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".toml", chainlang='tools = ["tools.py"]\nchains = ["."]\n')
    (pytester.path / "tools.py").write_text(TOOLS, encoding="utf-8")
    (pytester.path / "quote.chain.yaml").write_text(CHAIN, encoding="utf-8")
    (pytester.path / "advice.chain.yaml").write_text(THINK, encoding="utf-8")
    return pytester


def write(pytester: pytest.Pytester, name: str, text: str) -> Path:
    path = pytester.path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider", *args)


def test_a_faked_tool_passes_and_a_wrong_output_fails_naming_the_step(shop: pytest.Pytester) -> None:
    write(shop, "quote.chaintest.yaml", """
        tools:
          shop.price:
            - when: {item: pear}
              returns: {price: 2}
            - returns: {price: 1.5}
        tests:
          - name: apples
            chain: quote.chain.yaml
            inputs: {item: apple}
            expect:
              outputs: {price: 1.5}
              calls: {shop.price: [{item: apple}]}
          - name: pears are dearer
            chain: quote.chain.yaml
            inputs: {item: pear}
            expect:
              outputs: {price: 3}
    """)
    result = run(shop, "-v")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "quote.chaintest.yaml::apples PASSED" in out
    assert "outputs.price: expected 3, got 2" in out
    assert "step run quote.chain.yaml (line" in out


def test_fakes_are_checked_against_the_events_schemas_and_can_fail(shop: pytest.Pytester) -> None:
    write(shop, "bad.chaintest.yaml", """
        tests:
          - name: a fake the tool could never answer
            tools: {shop.price: {returns: {cost: 1}}}
            chain: quote.chain.yaml
            inputs: {item: apple}
          - name: the shop is down
            tools: {shop.price: {error: shop closed}}
            chain: quote.chain.yaml
            inputs: {item: apple}
            expect: {status: failed, error: shop closed}
          - name: the shop is down, unexpectedly
            tools: {shop.price: {sequence: [{error: shop closed}]}}
            chain: quote.chain.yaml
            inputs: {item: apple}
          - name: a fake of an event the project does not have
            tools: {shop.prices: {returns: {price: 1}}}
            chain: quote.chain.yaml
            inputs: {item: apple}
    """)
    result = run(shop)
    result.assert_outcomes(passed=1, failed=3)
    out = result.stdout.str()
    assert "does not match its result schema: 'price' is a required property" in out
    assert "status failed: shop closed; expected ok" in out
    assert "shop.prices is not an event of the project (did you mean shop.price?)" in out


def test_records_calls_and_references_between_steps(shop: pytest.Pytester) -> None:
    write(shop, "steps.chaintest.yaml", """
        tools:
          shop.price: {sequence: [{returns: {price: 1}}, {returns: {price: 2}}]}
        steps:
          - name: first
            chain: quote.chain.yaml
            inputs: {item: apple}
            expect:
              records:
                - {type: run_started, inputs: {item: apple}}
                - {type: step_finished, event: shop.price, result: {price: 1}}
          - chain: quote.chain.yaml
            inputs: {item: "{first.outputs.price}"}
            expect:
              outputs: {price: 2}
              calls: {shop.price: [{item: apple}, {item: "1"}]}
    """)
    result = run(shop)
    result.assert_outcomes(failed=1)  # the input is text: "{first.outputs.price}" is the number 1
    assert "expected a string" in result.stdout.str() or "is not of type 'string'" in result.stdout.str()
    write(shop, "steps.chaintest.yaml", """
        tools:
          shop.price: {sequence: [{returns: {price: 1}}, {returns: {price: 2}}]}
        steps:
          - name: first
            chain: quote.chain.yaml
            inputs: {item: apple}
          - chain: quote.chain.yaml
            inputs: {item: "apple number {first.outputs.price}"}
            expect:
              outputs: {price: 2}
              calls: {shop.price: [{item: apple}, {item: apple number 1}]}
              records:
                - {type: step_finished, event: shop.price, result: {price: 3}}
    """)
    result = run(shop)
    result.assert_outcomes(failed=1)
    assert "records[1]: no record" in result.stdout.str()
    assert "price: expected 3, got 2" in result.stdout.str()


def test_scripted_model_answers_and_commands(shop: pytest.Pytester) -> None:
    write(shop, "advice.chaintest.yaml", """
        models:
          rules:
            - task: think
              when: Is it a good time to buy?
              answer: {event: agent.reply, params: {message: Wait for the sales.}}
        setup:
          - command: threads create t1 --summary "Shopping for a bike"
            expect: {output: "t1: active"}
        chain: advice.chain.yaml
        expect:
          outputs: {answer: {event: agent.reply, params: {message: Wait for the sales.}}}
          records:
            - {type: model_call, task: think}
    """)
    run(shop).assert_outcomes(passed=1)


def test_golden_transcripts_are_written_then_compared(shop: pytest.Pytester) -> None:
    write(shop, "golden.chaintest.yaml", """
        chain: quote.chain.yaml
        now: 2026-11-19T09:00:00+00:00
        inputs: {item: apple}
        tools: {shop.price: {returns: {price: 1}}}
        expect: {transcript: goldens/apple.jsonl}
    """)
    missing = run(shop)
    missing.assert_outcomes(failed=1)
    assert "write it with pytest --chaintest-update" in missing.stdout.str()
    run(shop, "--chaintest-update").assert_outcomes(passed=1)
    golden = shop.path / "goldens" / "apple.jsonl"
    records = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines()]
    assert [r["type"] for r in records] == ["run_started", "step_started", "step_finished", "run_finished"]
    assert not any(key in r for r in records for key in ("ts", "run_id", "mac", "duration_ms"))
    run(shop).assert_outcomes(passed=1)  # a second run matches its golden
    golden.write_text(golden.read_text(encoding="utf-8").replace('"price": 1', '"price": 5'), encoding="utf-8")
    changed = run(shop)
    changed.assert_outcomes(failed=1)
    assert "record 3 differs from the golden apple.jsonl" in changed.stdout.str()


@pytest.mark.parametrize(("text", "expected"), [
    ("chain: quote.chain.yaml\nexpct: {}\n",
     "golden.chaintest.yaml:2:1: expct: not a key of a test file; did you mean 'expect'? the keys are chain, chainlang, data"),
    ("chain: quote.chain.yaml\nexpect: {outptus: {}}\n",
     "golden.chaintest.yaml:2:10: outptus: not a key of expect; did you mean 'outputs'? the keys are calls, error"),
    ("chain: quote.chain.yaml\nexpect: {status: done}\n", "golden.chaintest.yaml:2:18: expect/status: 'done' is not one of"),
    ("chain: [oops\n", "golden.chaintest.yaml:1:8: invalid YAML"),
    ("inputs: {a: 1}\n", "golden.chaintest.yaml:1:1: a test runs a chain (chain: FILE), fires an event (emit: EVENT) or has steps"),
    ("tests:\n  - {name: a, chain: x.chain.yaml}\n  - {name: a, chain: x.chain.yaml}\n", ":3:12: two tests are named 'a'"),
    ("!!python/object:os.system {}\n", "golden.chaintest.yaml:1:1:"),
])
def test_a_bad_test_file_is_a_collection_error_naming_the_line(shop: pytest.Pytester, text: str, expected: str) -> None:
    (shop.path / "golden.chaintest.yaml").write_text(text, encoding="utf-8")
    result = run(shop)
    result.assert_outcomes(errors=1)
    assert expected in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_a_chain_that_does_not_check_fails_pointing_at_the_users_file(shop: pytest.Pytester) -> None:
    """The test runs a copy of the project, but its failure names the user's file (relative to
    where pytest runs), line and column, with the checker's hint, never the temporary copy."""
    (shop.path / "quote.chain.yaml").write_text(CHAIN.replace("{inputs.item}", "{inputs.itme}"),
                                                encoding="utf-8")
    write(shop, "quote.chaintest.yaml", "chain: quote.chain.yaml\ninputs: {item: apple}\n"
                                        "tools: {shop.price: {returns: {price: 1}}}\nexpect: {status: ok}\n")
    result = run(shop)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert ("status invalid: quote.chain.yaml:7:33: CL022 the chain declares no input 'itme' (declared: item) "
            "(did you mean 'item'?); expected ok") in out, out
    assert "chaintest-" not in out.split("the project's copy is kept in")[0], out


def test_the_fixture_gives_python_tests_a_project_copy(shop: pytest.Pytester) -> None:
    shop.makepyfile(test_quote='''
        def test_quote(chain_project):
            project = chain_project(".", tools={"shop.price": {"returns": {"price": 4}}})
            result = project.run("quote.chain.yaml", {"item": "fig"}, now="2026-11-19T09:00:00+00:00")
            assert result.status == "ok" and result.outputs == {"price": 4}
            assert project.calls("shop.price") == [{"item": "fig"}]
            assert [r["type"] for r in result.records][-1] == "run_finished"
            assert project.command("threads list").exit_code == 0
            assert not (project.source / ".chainlang" / "runs").exists()  # the source is left as it was
    ''')
    run(shop).assert_outcomes(passed=1)


# -- the guide (docs/guides/testing.md) shows what runs ---------------------------------------

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "testing.md"
ROOT = GUIDE.parent.parent.parent


def guide_blocks(language: str) -> list[str]:
    import re

    return re.findall(rf"^```{language}\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.S | re.M)


def test_the_guide_shows_the_example_test_files_as_they_are() -> None:
    shown = {}
    for block in guide_blocks("yaml"):
        for name in ("next-week", "budget-watch"):
            path = ROOT / "examples" / "tests" / f"{name}.chaintest.yaml"
            if block.splitlines()[0] == path.read_text(encoding="utf-8").splitlines()[0]:
                shown[name] = (block, path.read_text(encoding="utf-8"))
    assert sorted(shown) == ["budget-watch", "next-week"]
    for block, text in shown.values():
        assert block == text


def test_the_guides_python_example_runs(pytester: pytest.Pytester) -> None:
    import shutil

    shutil.copytree(ROOT / "examples", pytester.path / "examples",
                    ignore=shutil.ignore_patterns(".chainlang", "__pycache__", "tests", "assistant"))
    [python] = guide_blocks("python")
    (pytester.path / "test_from_the_guide.py").write_text(python, encoding="utf-8")
    run(pytester, "test_from_the_guide.py").assert_outcomes(passed=1)


APPROVE = '''
chainlang: 1
chain: shop.approve
events:
  order.approved:
    payload:
      type: object
      properties:
        order: {type: string}
        ok: {type: boolean}
      required: [order, ok]
inputs:
  order: {type: string}
steps:
  - wait: {event: order.approved, where: "order == inputs.order", timeout: 1d}
    id: approval
  - shop.price: {item: "{inputs.order}"}
    if: "{approval.result.ok}"
outputs:
  approved: "{approval.result.ok}"
'''


def test_a_run_that_waits_ends_waiting_and_a_resume_step_goes_on_after_the_event(shop: pytest.Pytester) -> None:
    """§15 in a test file: a test never waits; its run ends as waiting at the wait, an emit
    delivers the event, and `resume: NAME` continues that run."""
    (shop.path / "approve.chain.yaml").write_text(APPROVE, encoding="utf-8")
    write(shop, "approve.chaintest.yaml", """
        tools:
          shop.price: {returns: {price: 5}}
        steps:
          - name: order
            chain: approve.chain.yaml
            inputs: {order: o-1}
            expect:
              status: waiting
              records:
                - {type: wait_started, event: order.approved, values: {inputs.order: o-1}}
          - command: waits list --json
            expect:
              exit: 0
          - emit: order.approved
            data: {order: o-2, ok: true}
          - name: still
            resume: order
            expect: {status: waiting}
          - emit: order.approved
            data: {order: o-1, ok: true}
          - resume: still
            expect:
              status: ok
              outputs: {approved: true}
              calls: {shop.price: [{item: o-1}]}
              records:
                - {type: wait_finished, status: ok, payload: {order: o-1, ok: true}}
    """)
    result = run(shop)
    result.assert_outcomes(passed=1)
    write(shop, "approve.chaintest.yaml", """
        steps:
          - emit: order.approved
            data: {order: o-1, ok: true}
          - resume: nobody
    """)
    result = run(shop)
    result.assert_outcomes(failed=1)
    assert "resume: nobody: not an earlier chain: or resume: step" in result.stdout.str()
