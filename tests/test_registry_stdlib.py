"""The standard event declarations in stdlib/*.yaml."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from chainlang.registry import EventSpec, Registry, RegistryError, stdlib_specs
from chainlang.registry.stdlib import load_declarations
from chainlang.resources import data_dir

SPECS = {spec.name: spec for spec in stdlib_specs()}

EXPECTED = {
    "tools.now",
    "tools.date_calc",
    "user.notify",
    "memory.append",
    "memory.search",
    "memory.digest",
    "task.schedule",
    "task.due",
    "task.register",
    "task.list",
    "task.cancel",
    "thread.match",
    "thread.summarize",
    "thread.list",
    "agent.think",
    "agent.chain",
    "agent.decide",
    "agent.reply",
    "model.ask",
    "chain.run",
    "user.ask",
    "user.answered",
}


def validator(schema: dict[str, Any]) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def params_ok(name: str, params: dict[str, Any]) -> bool:
    return validator(SPECS[name].params_schema).is_valid(params)


def result_ok(name: str, result: object) -> bool:
    schema = SPECS[name].result_schema
    assert schema is not None, name
    return validator(schema).is_valid(result)


def test_every_standard_event_is_declared() -> None:
    assert set(SPECS) == EXPECTED


def test_one_file_per_namespace() -> None:
    files = sorted(path.name for path in data_dir("stdlib").glob("*.yaml"))
    assert files == ["agent.yaml", "chain.yaml", "memory.yaml", "model.yaml", "task.yaml", "thread.yaml", "tools.yaml", "user.yaml"]
    for spec in SPECS.values():
        assert spec.source == f"stdlib/{spec.name.split('.')[0]}.yaml"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_schemas_are_valid_draft7(name: str) -> None:
    spec = SPECS[name]
    jsonschema.Draft7Validator.check_schema(spec.params_schema)
    assert spec.params_schema["type"] == "object"
    if spec.result_schema is not None:
        jsonschema.Draft7Validator.check_schema(spec.result_schema)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_declarations_are_complete(name: str) -> None:
    spec = SPECS[name]
    if name in ("task.due", "user.answered"):  # fired by serve / from outside: a payload, no tool behind it
        assert spec.kind == "external" and spec.implementation is None and spec.description
        assert set(spec.params_schema["required"]) == ({"task_id", "due_at"} if name == "task.due"
                                                       else {"question_id", "answer"})
        return
    assert spec.kind == "tool"
    assert spec.description and "\n" not in spec.description
    namespace, action = name.split(".")  # in its namespace's module, or a module of its own (agent.reply: reply)
    assert spec.implementation in (f"chainlang.stdlib.{namespace}:{action}", f"chainlang.stdlib.{action}:{action}") or (
        spec.implementation == f"chainlang.stdlib.{namespace}:{spec.implementation.split(':')[1]}")  # type: ignore[union-attr]
    assert isinstance(spec.idempotent, bool)
    # flags are booleans; model_calls (the calls an event makes at least) a count
    assert all(isinstance(value, int) if key == "model_calls" else isinstance(value, bool)
               for key, value in spec.effects.items())
    assert "side_effects" in spec.effects
    # closed params unless declared otherwise: unknown params are caught
    assert spec.params_schema.get("additionalProperties") is False


IMPLEMENTED = {"tools.now", "tools.date_calc", "user.notify", "chain.run", "task.register", "task.list", "task.cancel", "task.schedule", "thread.match", "thread.summarize", "thread.list", "memory.append", "memory.search", "memory.digest", "agent.think", "agent.chain", "agent.decide", "agent.reply", "model.ask", "user.ask"}  # every standard event now (user.ask: a wait)


def test_every_standard_event_is_implemented() -> None:
    assert EXPECTED == IMPLEMENTED | {"task.due", "user.answered"}  # external: fired by serve / from outside


def _walk(schema: object) -> list[dict[str, Any]]:
    found = []
    if isinstance(schema, dict):
        found.append(schema)
        for value in schema.values():
            found.extend(_walk(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_walk(value))
    return found


def test_enum_values_are_strings() -> None:
    """A YAML reader that took `no`/`on`/`08:00` for something else would show up here."""
    for spec in SPECS.values():
        for node in _walk([spec.params_schema, spec.result_schema]):
            if node.get("type") == "string" and "enum" in node:
                assert all(isinstance(value, str) for value in node["enum"]), spec.name


def test_fast_loader_reads_the_files_like_the_default_loader() -> None:
    from ruamel.yaml import YAML

    from chainlang.registry.stdlib import _safe_load

    for path in data_dir("stdlib").glob("*.yaml"):
        assert _safe_load(path.read_bytes(), path.name) == YAML(typ="safe").load(path.read_bytes()), path.name


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: -2.5\nc: true\nd: null\ne: ~\nf: text\ng: '08:00'\nh: [1, [2, {x: y}]]\n",
        "a: 0o17\nb: 0x1F\nc: .inf\nd: -.Inf\ne: 1_000\nf: +5\n",  # number forms
        "when: 2024-01-15\nflag: yes\ntime: 08:00\n",  # YAML 1.1-looking scalars
        "base: &b {k: 1}\ncopy: *b\nmerged: {<<: *b, z: 2}\n",  # aliases and merge keys
        "!!set {a, b}: 1\n? [1, 2]\n: complex key\n",
        "",
    ],
)
def test_fast_path_matches_the_safe_constructor(text: str) -> None:
    from ruamel.yaml import YAML

    from chainlang.registry.stdlib import _safe_load

    try:
        expected = YAML(typ="safe").load(text)
    except Exception:
        with pytest.raises(RegistryError):
            _safe_load(text.encode(), "t.yaml")
        return
    assert _safe_load(text.encode(), "t.yaml") == expected


def test_loading_is_cached_and_fast() -> None:
    assert stdlib_specs() is stdlib_specs()
    stdlib_specs.cache_clear()
    start = time.process_time()  # CPU time: the cost of loading, not the machine's other work
    stdlib_specs()
    elapsed = time.process_time() - start
    assert elapsed < 0.25, f"loading the stdlib took {elapsed * 1000:.1f} ms of CPU"  # generous: CI machines vary


def test_registry_from_stdlib() -> None:
    registry = Registry(stdlib_specs())
    assert registry.match("task.*") == ["task.cancel", "task.due", "task.list", "task.register", "task.schedule"]
    assert registry.suggest("tools.date_cal") == "tools.date_calc"
    assert registry.suggest("thread.sumarize") == "thread.summarize"


# -- the seed's params and results ---------------------------------------------------------


def test_tools_now() -> None:
    spec = SPECS["tools.now"]
    assert spec.effects["reads_clock"] is True and spec.idempotent
    assert params_ok("tools.now", {})
    assert not params_ok("tools.now", {"tz": "UTC"})
    required = set(spec.result_schema["required"])  # type: ignore[index]
    assert {"iso", "date", "time", "weekday", "timestamp", "hour", "minute"} <= required
    now = {
        "iso": "2024-01-15T10:30:00+00:00",
        "date": "2024-01-15",
        "time": "10:30:00",
        "weekday": "Monday",
        "timestamp": 1705314600,
        "year": 2024,
        "month": 1,
        "day": 15,
        "hour": 10,
        "minute": 30,
        "second": 0,
        "timezone": "+00:00",
    }
    assert result_ok("tools.now", now)
    assert not result_ok("tools.now", {**now, "weekday": "Funday"})


def test_tools_date_calc() -> None:
    now = {"iso": "2024-01-15T10:30:00+00:00", "date": "2024-01-15"}
    assert params_ok("tools.date_calc", {"from": now, "add": "1 week"})
    assert params_ok("tools.date_calc", {"from": now, "add": "1 week", "format": "week_range"})
    assert params_ok("tools.date_calc", {"from": "2024-01-15", "subtract": "1 day"})
    assert params_ok("tools.date_calc", {"from": now, "find": "last Tuesday"})
    assert not params_ok("tools.date_calc", {"add": "1 week"})  # from is required
    assert not params_ok("tools.date_calc", {"from": now, "format": "weekly"})
    assert not params_ok("tools.date_calc", {"from": {"nothing": 1}})
    assert result_ok("tools.date_calc", "2024-01-22")
    assert result_ok("tools.date_calc", {"start": "2024-01-22", "end": "2024-01-28"})


def test_user_notify() -> None:
    assert params_ok("user.notify", {"message": "Time to buy groceries"})
    assert params_ok("user.notify", {"message": "x", "title": "Reminder", "level": "warning"})
    assert not params_ok("user.notify", {})
    assert not params_ok("user.notify", {"message": "x", "level": "loud"})
    assert SPECS["user.notify"].idempotent  # once per step attempt, by its idempotency key


def test_memory_events() -> None:
    assert params_ok("memory.append", {"thread_id": "t1", "content": "met Sarah"})
    assert not params_ok("memory.append", {"content": "met Sarah"})
    assert params_ok("memory.search", {"query": "product launch", "scope": "all", "type": "project"})
    assert params_ok("memory.search", {"type": "journal", "date": "2024-01-09", "scope": "all"})
    assert params_ok("memory.search", {"query": "x", "date": {"start": "2024-01-22", "end": "2024-01-28"}})
    assert not params_ok("memory.search", {"scope": "everything"})
    assert result_ok("memory.search", {"matches": [{"content": "notes", "type": "journal", "date": "2024-01-09"}]})
    assert not result_ok("memory.search", {"results": []})
    assert params_ok("memory.digest", {"period": "daily"})
    assert not params_ok("memory.digest", {"period": "monthly"})


def test_task_events() -> None:
    action = [{"event": "user.notify", "params": {"message": "Time to buy groceries"}}]
    assert params_ok("task.schedule", {"type": "once", "at": "2024-01-15 17:00", "action": action})
    assert params_ok("task.schedule", {"type": "repeat", "interval": "1 day", "action": ["tools.now"]})
    assert not params_ok("task.schedule", {"type": "once", "action": action})  # once needs at
    assert not params_ok("task.schedule", {"type": "delay", "action": action})  # delay needs interval
    assert not params_ok("task.schedule", {"type": "once", "at": "tomorrow", "action": []})
    assert result_ok("task.schedule", {"task_id": "t1", "next_run": "2024-01-15T17:00:00+00:00"})
    assert not result_ok("task.schedule", {"task_id": "t1"})
    assert params_ok("task.schedule", {"type": "repeat", "cron": "0 8 * * 1-5", "action": ["tools.now"]})
    assert not params_ok("task.schedule", {"type": "repeat", "action": ["tools.now"]})  # interval or cron

    hook = {
        "trigger": "post:email.received",
        "condition": "sender contains 'Sarah' AND (subject contains 'budget' OR body contains 'budget')",
        "action": [{"event": "user.notify", "params": {"message": "Scheduled budget meeting with Sarah"}}],
    }
    assert params_ok("task.register", hook)
    assert params_ok("task.register", {**hook, "priority": 5, "max_depth": 2})
    assert not params_ok("task.register", {**hook, "trigger": "email.received"})
    assert not params_ok("task.register", {**hook, "max_depth": 0})
    assert result_ok("task.register", {"task_id": "h1"})

    assert params_ok("task.list", {"filter": {"due": "2024-01-15"}, "status": "pending"})
    assert not params_ok("task.list", {"status": "done"})
    assert result_ok("task.list", {"tasks": [{"task_id": "t1", "status": "pending", "type": "once"}]})


def test_thread_events() -> None:
    assert params_ok("thread.match", {"message": "Set up meetings"})
    assert params_ok("thread.match", {"message": "...", "thread_id": "morning_001"})
    assert result_ok("thread.match", {"action": "continue", "thread_id": "xxx"})
    assert result_ok("thread.match", {"action": "suggest_switch", "thread_id": "yyy", "reason": "better match"})
    assert result_ok("thread.match", {"action": "new", "thread_id": "new_xxx"})
    assert result_ok("thread.match", {"action": "suggest_new", "reason": "urgent personal check"})
    assert not result_ok("thread.match", {"action": "switch"})
    assert params_ok("thread.summarize", {"thread_id": "xxx"})


def test_agent_events() -> None:
    assert params_ok("agent.think", {"thread_id": "xxx"})
    assert params_ok("agent.think", {"thread_id": "xxx", "prompt": "find overlapping slots"})
    assert result_ok("agent.think", {"event": "agent.reply", "params": {"message": "hi"}})
    assert result_ok("agent.think", {"event": "agent.chain", "params": {"plan": "1. Get date"}})
    assert not result_ok("agent.think", {"event": "agent.other", "params": {}})

    assert params_ok("agent.chain", {"plan": "1. Get current date"})
    assert params_ok("agent.chain", {"plan": "1. Get current date", "max_repairs": 0})
    assert not params_ok("agent.chain", {"plan": "x", "max_repairs": 9})
    assert result_ok("agent.chain", {"chain": [{"event": "tools.now", "params": {}}, ["memory.search", "calendar.check"]],
                                     "result": {"date": "2024-01-15"}, "repairs": 1})
    assert not result_ok("agent.chain", {"chain": []})  # says how many repairs it took

    assert params_ok("agent.decide", {"event": "calendar.create", "params": {}, "condition": "find next available slot"})
    assert result_ok("agent.decide", {"action": "continue", "params": {"at": "2024-01-16T10:00:00"}})
    assert result_ok("agent.decide", {"action": "skip"})
    assert result_ok("agent.decide", {"action": "break"})
    assert not result_ok("agent.decide", {"action": "continue"})  # continue carries params
    assert not result_ok("agent.decide", {"action": "retry"})
    assert not result_ok("agent.decide", {"action": "skip", "params": {}})


# -- the declaration format ----------------------------------------------------------------------


def _decl_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "x.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def test_declaration_format_errors(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="unknown key 'paramz'"):
        load_declarations(_decl_file(tmp_path, "namespace: x\nevents:\n  x.y: {paramz: {}}\n"))
    with pytest.raises(RegistryError, match="outside the file's namespace"):
        load_declarations(_decl_file(tmp_path, "namespace: x\nevents:\n  z.y: {}\n"))
    with pytest.raises(RegistryError, match="not a valid event name"):
        load_declarations(_decl_file(tmp_path, "events:\n  Nope: {}\n"))
    with pytest.raises(RegistryError, match="implementation must be"):
        load_declarations(_decl_file(tmp_path, "events:\n  x.y: {implementation: 'not a pointer'}\n"))
    with pytest.raises(RegistryError, match="invalid YAML"):
        load_declarations(_decl_file(tmp_path, "events: [\n"))
    with pytest.raises(RegistryError, match="invalid YAML"):  # duplicate keys are rejected
        load_declarations(_decl_file(tmp_path, "events:\n  x.y: {}\n  x.y: {}\n"))


def test_declaration_defaults(tmp_path: Path) -> None:
    (spec,) = load_declarations(_decl_file(tmp_path, "events:\n  x.y:\n"), source="x.yaml")
    assert spec == EventSpec(
        name="x.y",
        params_schema={"type": "object", "properties": {}, "additionalProperties": False},
        source="x.yaml",
    )
