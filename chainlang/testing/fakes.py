"""Tool fakes: an event of the project answered by the test instead of its tool.

The event keeps its declaration (the checker sees the same chain) and its schemas: the
params the chain sends and the result the fake gives are validated as a real tool's are,
so a fake that returns what the tool never could fails the test. Every call is logged
with its params, for `expect.calls`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry

__all__ = ["FakeError", "FakeTool", "ToolFakes", "subset_problem"]


class FakeError(ValueError):
    """What a fake's `error:` answer raises: the step fails with its message (a ValueError: shown as it is)."""


class FakeTool:
    """The answers of one faked event (see chaintest.schema.json, `fake`)."""

    def __init__(self, event: str, answers: list[dict[str, Any]]) -> None:
        self.event = event
        self.answers = answers
        self.used = [0] * len(answers)
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, **params: Any) -> Any:
        self.calls.append(params)
        for index, answer in enumerate(self.answers):
            if "when" in answer and subset_problem(answer["when"], params) is not None:
                continue
            if "sequence" in answer:
                items = answer["sequence"]
                answer = items[min(self.used[index], len(items) - 1)]
            self.used[index] += 1
            if "error" in answer:
                raise FakeError(answer["error"])
            return answer.get("returns")
        raise FakeError(f"the test's fake of {self.event} has no answer for these params: "
                        f"{_short_json(params)} (add one without `when`, or a `when` that matches)")


class ToolFakes:
    """The fakes of one test, by event name."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.fakes = {event: FakeTool(event, value if isinstance(value, list) else [value])
                      for event, value in spec.items()}

    def install(self, registry: "Registry") -> "Registry":
        """A copy of `registry` whose faked events call the fakes. Raises ValueError for an event
        the project does not have, or one that is not a tool."""
        from chainlang.runtime.events import RUN_BY_INTERPRETER

        faked = registry.copy()
        for event, fake in self.fakes.items():
            spec = registry.get(event)
            if spec is None:
                hint = registry.suggest(event)
                raise ValueError(f"tools: {event} is not an event of the project"
                                 + (f" (did you mean {hint}?)" if hint else ""))
            if spec.kind != "tool" or event in RUN_BY_INTERPRETER:
                what = {"chain": "a chain", "external": "an external event"}.get(spec.kind, "run by the interpreter")
                raise ValueError(f"tools: {event} is {what}, not a tool: only tools can be faked")
            faked.replace(dataclasses.replace(spec, func=fake, implementation=None, is_async=True, accepts_ctx=False,
                                              source=f"{spec.source} (faked by the test)"))
        return faked

    def calls(self, event: str) -> list[dict[str, Any]]:
        return self.fakes[event].calls if event in self.fakes else []


def subset_problem(expected: Any, actual: Any, at: str = "") -> str | None:
    """Why `actual` does not match `expected` (None when it does): a mapping matches one that
    has its keys with matching values (more keys are fine), a list a list of the same length
    whose items match; anything else must be equal, as JSON (1 and 1.0 are equal, true and 1
    are not)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{at or 'the value'}: expected a mapping, got {_short_json(actual)}"
        for key, value in expected.items():
            where = f"{at}.{key}" if at else str(key)
            if key not in actual:
                return f"{where}: missing (there is {', '.join(map(str, actual)) or 'nothing'})"
            problem = subset_problem(value, actual[key], where)
            if problem is not None:
                return problem
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return f"{at or 'the list'}: {len(actual)} items, expected {len(expected)}: {_short_json(actual)}"
        for index, (want, got) in enumerate(zip(expected, actual)):
            problem = subset_problem(want, got, f"{at}[{index}]")
            if problem is not None:
                return problem
        return None
    if not _json_equal(expected, actual):
        return f"{at or 'the value'}: expected {_short_json(expected)}, got {_short_json(actual)}"
    return None


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _short_json(value: Any, limit: int = 200) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
