"""The wait step (LANGUAGE.md §15) in the editor's tools: `chainlang lsp` completes its form
and keys and the events it can wait for, the JSON Schemas of `chainlang schema` accept it
(and name a wrong key), and `chainlang graph` draws it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator

from chainlang.resources import data_dir
from tests.helpers import cli

WAITS = """\
chain: orders.confirm
events:
  approval.given:
    payload:
      type: object
      properties: {order: {type: string}, approved: {type: boolean}}
      required: [order, approved]
steps:
  - tools.now
  - wait: {event: approval.given, where: "order == 'A-17'", timeout: 2d, on_timeout: continue}
    id: approval
  - user.ask: {question: "Ship order A-17?", choices: [yes, no], timeout: 1d}
"""


# -- chainlang lsp --------------------------------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Any]:
    pytest.importorskip("pygls")
    from tests.lsp_util import finish, started

    c = started(tmp_path)
    yield c
    finish(c)


def test_lsp_completes_the_wait_form_and_its_keys(client: Any, tmp_path: Path) -> None:
    text = ("steps:\n"
            "  - wait:\n"
            "      event: user.answered\n"
            "      \n"                                    # 3: a key of the wait mapping
            "    \n"                                      # 4: a key of the wait step
            "  - wait: {event: user.answered, }\n"        # 5: a key of a flow wait
            "  - wait:\n"
            "      event: \n"                             # 7: the event waited for
            "  - wait: {timeout: 1d, event: user.}\n"     # 8: the same, in a flow mapping
            "  - \n")                                     # 9: any step
    uri = client.open(tmp_path / "w.chain.yaml", text)
    assert set(client.complete(uri, 3, 6)) == {"where", "timeout", "on_timeout"}  # event is written
    step = set(client.complete(uri, 4, 4))
    assert step == {"id", "if", "on_error", "description"}  # a wait step's own keys, nothing of an event step
    assert set(client.complete(uri, 5, len("  - wait: {event: user.answered, "))) == {"where", "timeout", "on_timeout"}
    waited = client.complete(uri, 7, len("      event: "))
    assert "user.answered" in waited
    assert not {"tools.now", "user.ask", "user.notify"} & set(waited)  # tools are called, not waited for
    assert client.complete(uri, 8, len("  - wait: {timeout: 1d, event: user.")) == ["user.answered"]
    assert "wait" in client.complete(uri, 9, 4)  # the form is offered among the step keys
    result = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                        "position": {"line": 3, "character": 6}})
    items = result["items"] if isinstance(result, dict) else result
    [timeout] = [i for i in items if i["label"] == "timeout"]
    assert "365d" in timeout["detail"]  # described from the schema


def test_lsp_reports_the_wait_checks_as_you_type(client: Any, tmp_path: Path) -> None:
    uri = client.open(tmp_path / "w.chain.yaml", "steps:\n  - wait: {event: user.answered}\n")
    [diag] = client.diagnostics(uri, 1)
    assert (diag["code"], diag["severity"]) == ("CL069", 2)  # a warning
    client.change(uri, "steps:\n  - wait: {event: tools.now, timeout: 1d}\n", 2)
    [diag] = client.diagnostics(uri, 2)
    assert diag["code"] == "CL068" and "tools.now is a tool" in diag["message"]
    client.change(uri, "steps:\n  - wait: {event: user.answered, timeout: 1d}\n", 3)
    assert client.diagnostics(uri, 3) == []


# -- the JSON Schemas of `chainlang schema` ---------------------------------------------


def validator(which: str) -> Draft7Validator:
    return Draft7Validator(json.loads((data_dir("schemas") / f"{which}.schema.json").read_text(encoding="utf-8")))


def errors(which: str, instance: Any) -> list[tuple[list[Any], str]]:
    return sorted(((list(e.absolute_path), e.message) for e in validator(which).iter_errors(instance)), key=str)


def load(text: str) -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    return yaml.load(text)


def test_schemas_accept_the_wait_step() -> None:
    assert errors("chain", load(WAITS)) == []
    block = {"steps": [{"wait": {"event": "approval.given", "where": "order == 'A-17'", "timeout": "30d",
                                 "on_timeout": "break"}, "id": "approval", "if": "true", "on_error": "continue",
                        "description": "the approval"}]}
    assert errors("chain", block) == []
    # a hooks file shares the step definitions (whether an action may wait is the checker's: CL068)
    assert errors("hooks", {"hooks": [{"trigger": "post:tools.now", "action": block["steps"]}]}) == []


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ({"wait": {"event": "approval.given", "timout": "1d"}},
         [([0, "wait"], "'timout' is not one of ['event', 'where', 'timeout', 'on_timeout']")]),
        ({"wait": {"where": "order == 'a'"}}, [([0, "wait"], "'event' is a required property")]),
        ({"wait": {"event": "approval.given", "on_timeout": "later"}},
         [([0, "wait", "on_timeout"], "'later' is not one of ['fail', 'continue', 'break']")]),
        ({"wait": {"event": "approval.given", "timeout": "soon"}},
         [([0, "wait", "timeout"], "'soon' does not match '^(\\\\d+(\\\\.\\\\d+)?(ms|s|m|h|d|w))+$'")]),
        ({"wait": {"event": "approval.given"}, "foreach": [1, 2]},
         [([0], "'foreach' is not one of ['id', 'if', 'on_error', 'description', 'wait']")]),
        ({"wait": "approval.given"}, [([0, "wait"], "'approval.given' is not of type 'object'")]),
    ],
    ids=["unknown-key", "no-event", "on-timeout", "timeout", "foreach", "not-a-mapping"],
)
def test_a_wrong_wait_gets_the_errors_of_its_form_only(step: dict[str, Any], expected: list[Any]) -> None:
    assert errors("chain", [step]) == sorted(expected, key=str)


# -- chainlang graph ---------------------------------------------------------------------


GRAPHED = """\
chain: orders.confirm
events:
  approval.given:
    payload:
      type: object
      properties: {order: {type: string}, approved: {type: boolean}}
      required: [order, approved]
steps:
  - tools.now
  - wait: {event: approval.given, where: "order == 'A-17'", timeout: 2d, on_timeout: continue}
    id: approval
  - user.ask: {question: "Ship order A-17?", choices: ["yes", "no"], timeout: 1d}
  - wait: {event: approval.given, where: "order == 'A-18'", timeout: 1h30m, on_timeout: break}
"""


def graph(tmp_path: Path, fmt: str) -> str:
    (tmp_path / "g.chain.yaml").write_text(GRAPHED, encoding="utf-8")
    proc = cli(tmp_path, "graph", "--format", fmt, "g.chain.yaml")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_graph_draws_a_wait_as_one_node(tmp_path: Path) -> None:
    assert graph(tmp_path, "mermaid").strip() == """\
flowchart TD
    begin(["start"])
    s1["tools.now"]
    s2{{"approval: wait approval.given (2d)<br/>where order == 'A-17'<br/>on_timeout continue"}}
    s3{{"user.ask 'Ship order A-17?' (1d)"}}
    s4{{"wait approval.given (1h30m)<br/>where order == 'A-18'<br/>on_timeout break"}}
    finish(["end"])
    begin --> s1
    s1 --> s2
    s2 --> s3
    s3 --> s4
    s4 -->|timed out| finish
    s4 --> finish"""


@pytest.mark.slow  # two CLI processes
def test_graph_dot_and_json_of_a_wait(tmp_path: Path) -> None:
    dot = graph(tmp_path, "dot")
    assert 's3 [label="user.ask \'Ship order A-17?\' (1d)", shape=hexagon];' in dot
    assert 's4 -> finish [label="timed out"];' in dot
    data = json.loads(graph(tmp_path, "json"))
    wait, ask = data["steps"][1], data["steps"][2]
    assert wait["kind"] == ask["kind"] == "wait"
    assert wait["wait"] == {"event": "approval.given", "where": "order == 'A-17'", "timeout": 172800.0,
                            "on_timeout": "continue"}
    assert ask["event"] == "user.ask" and ask["wait"]["event"] == "user.answered"
    assert ask["wait"]["ask"] == {"question": "Ship order A-17?", "choices": ["yes", "no"], "timeout": "1d"}
    assert {"from": "s4", "to": "finish", "label": "timed out"} in data["edges"]
