"""Tools given as Python objects (`tools=[fn, obj.method, module, {"app.x": fn}, "pkg.mod"]`:
LANGUAGE.md §11, "The Python API"), through `open_project`, the one-shot `chainlang.run`
and `chainlang.emit`, as an application passes them.

What each test checks is whose state the tools use: the application's own objects and
modules, never a second import of them, and that what cannot be a tool is refused with an
error that says what to give instead.
"""

from __future__ import annotations

import importlib
import socket
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import chainlang
from chainlang.errors import UsageError

SEEN: list[str] = []


def app_greet(who: str) -> str:
    """A plain typed function: the event app.greet (its first underscore is the dot)."""
    SEEN.append(who)
    return f"Hello, {who}!"


def shout(text: str) -> str:
    """No underscore: the event is named after this module (`test_api_tools.shout`)."""
    SEEN.append(text)
    return text.upper()


@chainlang.event("app.wave", description="Wave at someone")
async def wave_at(who: str) -> dict[str, str]:
    SEEN.append(f"wave:{who}")
    return {"waved": who}


class Counter:
    """An application object whose methods are tools: their state is the object's."""

    def __init__(self) -> None:
        self.count = 0

    def counter_bump(self, by: int = 1) -> int:
        self.count += by
        return self.count

    @chainlang.event("counter.add", description="Add to the counter")
    def add(self, by: int) -> int:
        self.count += by
        return self.count


@pytest.fixture(autouse=True)
def _fresh() -> None:
    SEEN.clear()


def chain(root: Path, steps: str, outputs: str = "", name: str = "t.chain.yaml") -> Path:
    path = root / name
    text = "chainlang: 1\nsteps:\n" + textwrap.indent(textwrap.dedent(steps), "  ")
    if outputs:
        text += f"outputs: {outputs}\n"
    path.write_text(text, encoding="utf-8")
    return path


def run_in_project(root: Path, chain_path: Path, tools: list[Any], inputs: dict[str, Any] | None = None) -> Any:
    with chainlang.open_project_sync(root, tools=tools) as project:
        return project.chain(chain_path.name).run_sync(inputs)


# -- what is accepted ----------------------------------------------------------------------------


def test_plain_and_event_functions(tmp_path: Path) -> None:
    path = chain(tmp_path, """\
        - app.greet: {who: Ada}
        - test_api_tools.shout: {text: hi}
        - app.wave: {who: Bob}
        """, '{greeting: "{app.greet.result}", loud: "{test_api_tools.shout.result}", '
        'waved: "{app.wave.result.waved}"}')
    result = run_in_project(tmp_path, path, [app_greet, shout, wave_at])
    assert result.status == "ok", result.error
    assert result.outputs == {"greeting": "Hello, Ada!", "loud": "HI", "waved": "Bob"}
    assert SEEN == ["Ada", "hi", "wave:Bob"]


def test_bound_methods_keep_their_state_on_the_callers_object(tmp_path: Path) -> None:
    path = chain(tmp_path, """\
        - counter.bump: {by: 2}
        - counter.add: {by: 5}
        - counter.bump: {}
        """, '{last: "{counter.bump.result}"}')
    counter = Counter()
    result = run_in_project(tmp_path, path, [counter.counter_bump, counter.add])
    assert result.status == "ok", result.error
    assert counter.count == 8 and result.outputs == {"last": 8}
    other = Counter()  # a second object: its own state, the first one's untouched
    assert run_in_project(tmp_path, path, [other.counter_bump, other.add]).status == "ok"
    assert (counter.count, other.count) == (8, 8)


MODULE = '''\
import chainlang

IMPORTS = 0
IMPORTS += 1
COUNT = 0


@chainlang.event("mod.bump", description="Count in the module")
def bump(by: int = 1) -> int:
    global COUNT
    COUNT += by
    return COUNT
'''


def a_module(root: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = root / "lib" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(path.parent))
    return path


def modules_from(path: Path) -> list[str]:
    return [name for name, module in list(sys.modules.items())
            if getattr(module, "__file__", None) and Path(module.__file__ or "").resolve() == path.resolve()]


def test_a_module_object_is_the_callers_not_imported_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = a_module(tmp_path, "e26_objmod", monkeypatch)
    module = importlib.import_module("e26_objmod")
    monkeypatch.setitem(sys.modules, "e26_objmod", module)  # forgotten again when the test ends
    path = chain(tmp_path, "- mod.bump: {by: 3}\n- mod.bump: {}\n", '{n: "{mod.bump.result}"}')
    result = run_in_project(tmp_path, path, [module])
    assert result.status == "ok", result.error
    assert result.outputs == {"n": 4}
    assert module.COUNT == 4 and module.IMPORTS == 1  # the caller's module, its state
    assert modules_from(source) == ["e26_objmod"]  # not imported a second time under another name
    assert chainlang.run(path, tools=[module]).status == "ok"  # the one-shot too
    assert module.COUNT == 8 and modules_from(source) == ["e26_objmod"]


def test_a_module_name_is_imported_as_that_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = a_module(tmp_path, "e26_strmod", monkeypatch)
    monkeypatch.setitem(sys.modules, "e26_strmod", None)  # not imported yet (and forgotten when the test ends)
    del sys.modules["e26_strmod"]
    path = chain(tmp_path, "- mod.bump: {by: 2}\n", '{n: "{mod.bump.result}"}')
    result = run_in_project(tmp_path, path, ["e26_strmod"])
    assert result.status == "ok", result.error
    module = sys.modules["e26_strmod"]  # what the application gets when it imports it
    assert module.COUNT == 2 and modules_from(source) == ["e26_strmod"]
    assert importlib.import_module("e26_strmod") is module


def test_a_mapping_names_the_event(tmp_path: Path) -> None:
    path = chain(tmp_path, "- app.hello: {who: Eve}\n- app.anon: {n: 2}\n",
                 '{h: "{app.hello.result}", a: "{app.anon.result}"}')
    result = run_in_project(tmp_path, path, [{"app.hello": app_greet, "app.anon": lambda n: n * 10}])
    assert result.status == "ok", result.error
    assert result.outputs == {"h": "Hello, Eve!", "a": 20}
    assert SEEN == ["Eve"]


def test_the_one_shot_run_and_emit_take_functions(tmp_path: Path) -> None:
    path = chain(tmp_path, "- app.greet: {who: Ada}\n", '{g: "{app.greet.result}"}')
    result = chainlang.run(path, tools=[app_greet])
    assert result.status == "ok", result.error
    assert result.outputs == {"g": "Hello, Ada!"}
    (tmp_path / "inbox.hooks.yaml").write_text(textwrap.dedent("""\
        events:
          email.received:
            description: A message arrived.
            payload: {type: object, properties: {sender: {type: string}}, required: [sender]}
        hooks:
          - id: greet-sender
            trigger: post:email.received
            action:
              - app.greet: {who: "{sender}"}
        """), encoding="utf-8")
    emitted = chainlang.emit("email.received", {"sender": "Sarah"}, project=tmp_path, tools=[app_greet])
    assert emitted.status == "ok", emitted
    assert SEEN == ["Ada", "Sarah"]


# -- what is refused -----------------------------------------------------------------------------


def refused(tmp_path: Path, tools: Any) -> str:
    """The UsageError message of opening a project, of the one-shot run and of the one-shot
    emit with `tools` (all three must refuse, with the same words)."""
    path = chain(tmp_path, "- app.greet: {who: x}\n")
    messages = []
    for attempt in (lambda: chainlang.open_project_sync(tmp_path, tools=tools),
                    lambda: chainlang.run(path, tools=tools),
                    lambda: chainlang.emit("app.greet", {"who": "x"}, project=tmp_path, tools=tools)):
        with pytest.raises(UsageError) as raised:
            attempt()
        messages.append(str(raised.value))
    assert messages[0] == messages[1] == messages[2], messages
    assert "Traceback" not in messages[0]
    return messages[0]


def test_a_bare_string_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, "mytools.py")
    assert "tools= takes a list" in message and "'mytools.py'" in message


def test_a_class_is_refused(tmp_path: Path) -> None:
    message = refused(tmp_path, [Counter])
    assert "Counter" in message and "is a class" in message and "bound method" in message


def test_a_lambda_is_refused_with_the_mapping_suggested(tmp_path: Path) -> None:
    message = refused(tmp_path, [lambda who: who])
    assert "a lambda" in message and "no name" in message and "tools=[{'app.action': fn}]" in message


def test_a_callable_object_without_a_name_is_refused(tmp_path: Path) -> None:
    class Tool:
        def __call__(self, x: int) -> int:
            return x

    message = refused(tmp_path, [Tool()])
    assert "no name" in message and "tools=[{'app.action': fn}]" in message


def test_a_function_named_like_a_standard_event_is_refused(tmp_path: Path) -> None:
    def user_notify(message: str) -> str:
        return message

    message = refused(tmp_path, [user_notify])
    assert "'user.notify'" in message and "standard event" in message
    assert "tools=[{'app.notify': user_notify}]" in message


def test_two_functions_deriving_one_name_say_which(tmp_path: Path) -> None:
    first, second = Counter(), Counter()
    message = refused(tmp_path, [first.counter_bump, second.counter_bump])
    assert "'counter.bump' is declared twice" in message
    assert "Counter.counter_bump (given with tools=)" in message


def test_a_function_whose_annotations_pydantic_cannot_use(tmp_path: Path) -> None:
    def app_listen(conn: socket.socket) -> str:
        return "x"

    message = refused(tmp_path, [app_listen])
    assert "app_listen" in message and "given with tools=" in message and "socket" in message
    assert "annotate params with JSON types" in message
