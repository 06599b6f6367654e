"""The compile stage and `chainlang graph`: structure, formats, compiled values, hook order."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from chainlang.pipeline import check_files, default_registry
from chainlang.compile import compile_chain, hook_order
from chainlang.expr import DataResolver
from chainlang.compile.render import to_dot, to_json, to_mermaid
from tests.helpers import cli_here

pytestmark = pytest.mark.slow  # the fast tier (make test-fast) leaves it out

REPO = Path(__file__).resolve().parent.parent


def compiled(tmp_path: Path, text: str, name: str = "x.chain.yaml"):
    path = tmp_path / name
    path.write_text(text)
    result = check_files([str(path)], registry=default_registry())
    assert result.ok, [str(d) for d in result.diagnostics]
    return result.chains[0], compile_chain(result.chains[0])


CHAIN = """\
chain: demo.flow
steps:
  - tools.now
  - [memory.search, task.list]
  - if: "tools.now.hour < 12"
    then:
      - user.notify: {message: "morning {tools.now.time}"}
    else:
      - user.notify: {message: afternoon}
  - id: each
    foreach: "[1, 2]"
    as: n
    retry: {attempts: 2}
    event: user.notify
    params: {message: "n={n}", title: fixed}
outputs:
  when: "{tools.now.iso}"
"""


def test_mermaid_golden(tmp_path: Path) -> None:
    _, graph = compiled(tmp_path, CHAIN)
    assert to_mermaid(graph) == """\
flowchart TD
    begin(["start"])
    s1["tools.now"]
    s2[["parallel"]]
    s2_1["memory.search"]
    s2_2["task.list"]
    s2_join(("end parallel"))
    s3{"if tools.now.hour < 12"}
    s3_then_1["user.notify"]
    s3_else_1["user.notify"]
    s4["each: user.notify<br/>foreach n in [1, 2]<br/>retry x2"]
    finish(["end"])
    begin --> s1
    s1 --> s2
    s2 --> s2_1
    s2 --> s2_2
    s2_1 --> s2_join
    s2_2 --> s2_join
    s2_join --> s3
    s3 -->|then| s3_then_1
    s3 -->|else| s3_else_1
    s3_then_1 --> s4
    s3_else_1 --> s4
    s4 --> finish"""


FLOW = """\
inputs:
  level: {type: string, enum: [low, high], default: low}
steps:
  - try:
      - tools.now
    catch:
      - fail: "no clock: {error.message}"
    finally:
      - user.notify: {message: done}
  - switch: "{inputs.level}"
    cases:
      low: [user.notify: {message: low}]
      high: []
"""


def test_try_and_switch_branches_are_alternatives(tmp_path: Path) -> None:
    _, graph = compiled(tmp_path, FLOW)
    edges = [line.strip() for line in to_mermaid(graph).splitlines() if "-->" in line]
    # catch is taken from the try's fork on a failure, and ends the chain (a fail): no join of it;
    # finally comes after the try's steps, whichever way they went
    assert "s1 --> s1_try" in edges and "s1 -->|on failure| s1_catch" in edges
    assert "s1_catch --> s1_catch_1" in edges and not any(e.startswith("s1_catch_1 ") for e in edges)
    assert "s1_try_join -->|always| s1_finally" in edges
    # each case is an edge from the switch labelled by its key; no default: no match skips the block
    assert "s2 -->|= low| s2_case1" in edges and "s2 -->|= high| s2_case2" in edges
    assert "s2 --> s2_join" in edges


def test_dot_and_json_describe_the_same_graph(tmp_path: Path) -> None:
    _, graph = compiled(tmp_path, CHAIN)
    dot = to_dot(graph)
    assert dot.startswith("digraph chain {") and dot.endswith("}")
    assert dot.count(" -> ") == 12
    data = json.loads(to_json(graph))
    assert data["chain"] == "demo.flow"
    assert [s["path"] for s in data["steps"]] == ["1", "2", "3", "4"]
    assert data["steps"][3]["retry"]["attempts"] == 2 and data["steps"][3]["as"] == "n"
    assert len(data["edges"]) == 12


def test_compiled_expressions_and_values_evaluate(tmp_path: Path) -> None:
    _, graph = compiled(tmp_path, CHAIN)
    cond = graph.nodes[2].condition
    assert cond is not None
    hour = DataResolver({"tools": {"now": {"hour": 9}}})
    assert cond(hour) is True
    params = graph.nodes[3].params
    assert params["title"].render(hour) == "fixed"  # literal: no work
    assert params["message"].render(DataResolver({"n": 2})) == "n=2"
    assert graph.outputs["when"].render(DataResolver({"tools": {"now": {"iso": "2024-01-01T00:00:00+00:00"}}})) \
        == "2024-01-01T00:00:00+00:00"


def test_nested_templates_render_into_a_copy(tmp_path: Path) -> None:
    _, graph = compiled(tmp_path, 'steps:\n  - tools.now\n  - task.list: {filter: {due: "{tools.now.date}", tags: [a, "{tools.now.weekday}"]}}\n')
    value = graph.nodes[1].params["filter"]
    resolve = DataResolver({"tools": {"now": {"date": "2024-01-15", "weekday": "Monday"}}})
    assert value.render(resolve) == {"due": "2024-01-15", "tags": ["a", "Monday"]}
    assert value.data == {"due": "{tools.now.date}", "tags": ["a", "{tools.now.weekday}"]}  # untouched


def test_hook_order_priority_then_after_then_file_order(tmp_path: Path) -> None:
    chain, graph = compiled(tmp_path, """\
steps: [tools.now]
hooks:
  - {id: a, trigger: post:tools.now, action: [user.notify: {message: a}]}
  - {id: b, trigger: post:tools.now, priority: 5, after: [c], action: [user.notify: {message: b}]}
  - {id: c, trigger: post:tools.now, action: [user.notify: {message: c}]}
  - {id: d, trigger: post:tools.now, priority: 5, action: [user.notify: {message: d}]}
""")
    assert hook_order(chain) == ["d", "a", "c", "b"]
    assert graph.hooks == ("d", "a", "c", "b")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_here(REPO, *args)


@pytest.mark.parametrize("fmt", ["mermaid", "dot", "json"])
def test_cli_graph_of_every_example(fmt: str) -> None:
    for path in sorted((REPO / "examples").rglob("*.chain.yaml")):
        proc = run_cli("graph", "--format", fmt, str(path.relative_to(REPO)))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip()


def test_cli_graph_refuses_a_chain_with_errors() -> None:
    proc = run_cli("graph", "tests/chains/err/ref-forward.chain.yaml")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "[CL023 ref-forward]" in proc.stderr


HOOKED = """\
chain: demo.hooks
events:
  deploy.finished:
    description: The CI system finished a deployment.
    payload: {type: object, properties: {ok: {type: boolean}}, required: [ok]}
steps:
  - tools.now
  - user.notify: {message: hello}
  - task.register:
      trigger: post:tools.now
      action:
        - user.notify: {message: later}
hooks:
  - id: loud
    trigger: pre:user.notify
    set: {title: Note}
  - id: after-notify
    trigger: post:user.*
    condition: event.params.level == 'error'
    max_depth: 2
    action:
      - user.notify: {message: again, level: warning}
  - id: deploy
    trigger: post:deploy.finished
    condition: not ok
    action:
      - user.notify: {message: Deploy failed, level: error}
"""


def test_hooks_are_drawn_beside_the_flow(tmp_path: Path) -> None:
    """Each hook in firing order with its trigger, condition and what it does; dashed edges
    into (pre) or out of (post) every step of its event (globs too), from an external event's
    own node, and from the step that registers an action."""
    _, graph = compiled(tmp_path, HOOKED)
    mermaid = to_mermaid(graph)
    hooks_part = mermaid.split("    finish([\"end\"])\n", 1)[1]
    assert hooks_part == """\
    hook1[/"hook loud<br/>pre:user.notify<br/>set title"/]
    hook2[/"hook after-notify<br/>post:user.*<br/>if event.params.level == 'error'<br/>action: user.notify"/]
    hook3[/"hook deploy<br/>post:deploy.finished<br/>if not ok<br/>action: user.notify"/]
    event1>"deploy.finished"]
    hook4[/"hook registered by step 3<br/>post:tools.now<br/>action: user.notify"/]
    begin --> s1
    s1 --> s2
    s2 --> s3
    s3 --> finish
    hook1 -.->|pre| s2
    s2 -.->|post| hook2
    event1 -.->|post| hook3
    s3 -.->|registers| hook4
    s1 -.->|post| hook4"""
    dot = to_dot(graph)
    assert 'hook1 [label="hook loud\\npre:user.notify\\nset title", shape=parallelogram];' in dot
    assert 'event1 [label="deploy.finished", shape=cds];' in dot
    assert '  hook1 -> s2 [label="pre", style=dashed];' in dot
    assert '  s2 -> hook2 [label="post", style=dashed];' in dot


def test_a_hooks_file_is_drawn_as_its_hooks() -> None:
    proc = run_cli("graph", "examples/budget-watch.hooks.yaml")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "flowchart TD" and "begin" not in proc.stdout, proc.stdout
    assert lines[1].startswith('    hook1[/"hook sarah-budget<br/>post:email.received<br/>if sender contains')
    assert lines[1].endswith('<br/>action: calendar.create, user.notify"/]')
    assert lines[2:] == ['    event1>"email.received"]', "    event1 -.->|post| hook1"]
