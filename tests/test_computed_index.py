"""Computed indexes `x[expr]` and `thread[EXPR].KEY` (LANGUAGE.md §3, §4), end to end
through the CLI: a chain picks `jokes[best.result.id]`, a run reads a thread by a computed
id, the checker reports what is certainly wrong, and the run what it could not know.
(The expression semantics are data: tests/expr/compliance/computed_index.json; both
engines: tests/engines/computed-index.chain.yaml and thread-computed-id.chain.yaml.)"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from chainlang.expr import ExprSyntaxError, parse_expression
from chainlang.expr import ast
from chainlang.expr.ast import Index, Key, Ref, dump, unparse
from tests.helpers import cli, show

TOOLS = '''\
from chainlang import event


@event("t.echo", description="Return the value", idempotent=True)
def echo(value: object = None) -> dict:
    return {"value": value}
'''


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "tt.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text('tools = ["tt.py"]\n', encoding="utf-8")
    return tmp_path


def chain(project: Path, text: str, name: str = "c.chain.yaml") -> str:
    (project / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return name


def test_a_chain_picks_an_item_by_an_id_another_step_gave(project: Path) -> None:
    name = chain(project, """\
        inputs:
          scores: {type: object, default: {ann: 3, bob: 5}}
          who: {type: string, default: bob}
        steps:
          - id: jokes
            t.echo: {value: [knock knock, why the chicken, a horse walks in]}
          - id: best
            t.echo: {value: {id: 1}}
          - id: picked
            t.echo: {value: "{jokes.value[best.value.id]}"}
          - foreach: "[0, 1]"
            steps:
              - t.echo: {value: "{jokes.value[-1 - item]}"}
        outputs:
          picked: "{picked.value}"
          backwards: "{t.echo.result.value}"
          score: "{inputs.scores[inputs.who]}"
          none: "{jokes.value[best.value.id + 10]}"
        """)
    assert cli(project, "check", name).returncode == 0
    proc = cli(project, "run", name, "--json")
    assert proc.returncode == 0, show(proc)
    assert json.loads(proc.stdout) == {"picked": "why the chicken", "backwards": "why the chicken",
                                       "score": 5, "none": None}


def test_an_index_of_the_wrong_kind_fails_the_step_with_a_clear_message(project: Path) -> None:
    name = chain(project, """\
        steps:
          - id: jokes
            t.echo: {value: [a, b]}
          - id: best
            t.echo: {value: {id: "1", flag: true}}
          - id: text_id
            t.echo: {value: "{jokes.value[best.value.id]}"}
            on_error: continue
          - id: boolean
            t.echo: {value: "{jokes.value[best.value.flag]}"}
            on_error: continue
          - id: fixed
            t.echo: {value: "{jokes.value[best.value.id | int]}"}
        outputs:
          text_id: "{text_id.error.message}"
          boolean: "{boolean.error.message}"
          fixed: "{fixed.value}"
        """)
    proc = cli(project, "run", name, "--json")
    assert proc.returncode == 0, show(proc)
    out = json.loads(proc.stdout)
    assert out["text_id"] == ("params (line 6): a list is indexed by a whole number, not by the string '1'; "
                              "convert it: x[i | int]")
    assert "an index must be a whole number (into a list) or a string (into an object), not a boolean" \
        in out["boolean"]
    assert out["fixed"] == "b"


def test_the_checker_reports_what_is_certainly_wrong(project: Path) -> None:
    name = chain(project, """\
        inputs:
          names: {type: array, items: {type: string}, default: [a]}
          scores: {type: object, properties: {ann: {type: integer}}, default: {ann: 1}}
          who: {type: string, default: ann}
          n: {type: integer, default: 0}
        steps:
          - t.echo: {value: "{inputs.names[inputs.who]}"}
          - t.echo: {value: "{inputs.scores[inputs.n]}"}
          - t.echo: {value: "{inputs.names[inputs.n > 0]}"}
          - t.echo: {value: "{t.echo[inputs.n]}"}
          - t.echo: {value: "{inputs.who[inputs.n]}"}
          - t.echo: {value: "{inputs.names[nothing_here]}"}
          - t.echo: {value: "{inputs.names[inputs.n] + inputs.scores[inputs.who]}"}
        """)
    proc = cli(project, "check", name, "--format", "json")
    assert proc.returncode == 1, show(proc)
    found = [(d["line"], d["rule"], d["message"]) for d in json.loads(proc.stdout)]
    assert (7, "CL027", "a list is indexed by a whole number, not by a string; convert it: x[i | int]") in found
    assert (8, "CL027", "an object is indexed by a string key, not by a number; convert it: x[i | string]") in found
    assert any(line == 9 and rule == "CL027" and "not a boolean" in message for line, rule, message in found)
    assert any(line == 10 and rule == "CL025" and "computed index cannot choose" in message
               for line, rule, message in found)
    assert (11, "CL027", "only lists and objects can be indexed; this is a string") in found
    assert any(line == 12 and rule == "CL021" for line, rule, _ in found), found  # the index's own references
    assert not any(line == 13 for line, _, _ in found), found  # string + number: only the run can tell


def test_a_thread_is_read_by_a_computed_id(project: Path) -> None:
    made = cli(project, "threads", "create", "plan-1", "--summary", "Planning the Beacon launch")
    assert made.returncode == 0, show(made)
    name = chain(project, """\
        inputs:
          which: {type: string, default: plan-1}
        steps:
          - id: pick
            t.echo: {value: {thread: plan-1, number: 7}}
          - t.echo: {value: "{thread[inputs.which].summary}"}
          - if: "thread[pick.value.thread].status == 'active'"
            then:
              - id: active
                t.echo: {value: yes}
          - id: missing
            t.echo: {value: "{thread[pick.value.thread + '-x'].summary}"}
            on_error: continue
          - id: number
            t.echo: {value: "{thread[pick.value.number].summary}"}
            on_error: continue
        outputs:
          summary: "{t.echo[1].value}"
          active: "{active.value}"
          missing: "{missing.error.message}"
          number: "{number.error.message}"
        """)
    assert cli(project, "check", name).returncode == 0
    proc = cli(project, "run", name, "--json")
    assert proc.returncode == 0, show(proc)
    out = json.loads(proc.stdout)
    assert out["summary"] == "Planning the Beacon launch"
    assert out["active"] == "yes"
    assert out["missing"].startswith("params (line 11): thread['plan-1-x'].summary: no thread 'plan-1-x' in the "
                                     "project's store (did you mean 'plan-1'?)")
    assert out["number"] == ("params (line 14): thread[pick.value.number].summary: the thread id must be a "
                             "non-empty string, got number 7")


def test_literal_indexes_stay_literal_and_the_rest_is_computed() -> None:
    assert parse_expression("x[0]").segments[1] == Index(0, 1, 4)  # type: ignore[attr-defined]
    assert parse_expression("x[-1]").segments[1] == Index(-1, 1, 5)  # type: ignore[attr-defined]
    assert parse_expression("x['k']").segments[1] == Key("k", 1, 6)  # type: ignore[attr-defined]
    ref = parse_expression("x[(0)]")
    assert isinstance(ref, Ref) and type(ref.segments[1]) is Index
    for text in ("jokes[best.result.id]", "rows[loop.pass - 1].name", "x[a[b[c]]]", "(x | keys)[i]", "x[true]",
                 "thread[inputs.thread_id].summary", "x[y | length]"):
        tree = parse_expression(text)
        assert any(type(s) is ast.Computed for s in tree.segments), text  # type: ignore[attr-defined]
        again = parse_expression(unparse(tree))
        assert dump(again).replace(" ", "") and _shape(again) == _shape(tree), text


def _shape(tree: object) -> str:
    """A dump without the spans."""
    import re

    return re.sub(r"@\d+:\d+", "", dump(tree))  # type: ignore[arg-type]


def test_nested_computed_indexes_are_bounded() -> None:
    deep = "x[" * 70 + "0" + "]" * 70
    with pytest.raises(ExprSyntaxError) as info:
        parse_expression(deep)
    assert info.value.category == "limit"
    assert "nested too deeply" in info.value.message


def test_computed_thread_references_kept_for_rereading_are_bounded() -> None:
    """On Temporal every reference the snapshot holds is read again after each activity: a
    loop over many computed thread ids keeps only the most recent ones (an older one is
    fetched again when it is needed), so the reads per activity stay bounded."""
    import asyncio

    from chainlang.engine.temporal.threadrefs import COMPUTED_KEPT, Snapshot
    from chainlang.expr.ast import Name

    class Counted(Snapshot):
        """The snapshot with the reads activity replaced by a count of what it was asked."""

        def __init__(self) -> None:
            super().__init__()
            self.asked: list[int] = []

        async def _read_all(self) -> None:
            self.asked.append(len(self.keys))
            for key in self.keys:
                self.values.setdefault(key, {"value": key})

    snapshot = Counted()
    rest = (Name("summary"),)
    for n in range(COMPUTED_KEPT * 3):
        asyncio.run(snapshot.fetch(f"t-{n}", rest))
    assert max(snapshot.asked) == COMPUTED_KEPT
    assert len(snapshot.keys) == len(snapshot.values) == COMPUTED_KEPT
    asyncio.run(snapshot.fetch("t-0", rest))  # evicted long ago: fetched again
    assert snapshot.read("t-0", rest, "thread['t-0'].summary") is not None
