"""Tools given as Python objects (the API's `tools=[greet, my_module, obj.method]`), as
they are: the function, bound method or module the application already holds, never
imported a second time (so the tools share the application's module state).

- a function or bound method decorated with `@event` is that event;
- a plain typed function (no decorator) is an event named after it: `email_search` is
  `email.search` (its first underscore becomes the dot), and a name without an
  underscore takes its module's last name as namespace (`greet` in `app/tools.py` is
  `tools.greet`); `{"app.greet": greet}` names it explicitly;
- a module contributes its `@event` tools and its hooks, as a module name would;
- a string is a module name or a `.py` file, loaded as `chainlang.toml`'s `tools` are.

A name is never guessed where it would mislead: a lambda or a callable object (no name
to derive one from), a plain function whose derived name is a standard event's
(`user_notify` → `user.notify`) and a class are refused (ToolLoadError) with what to give
instead, e.g. the mapping `{"app.notify": user_notify}`.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MethodType, ModuleType
from typing import Any, Union

from chainlang.registry.decorator import build_spec, spec_of
from chainlang.registry.errors import ToolLoadError
from chainlang.registry.hooks import HookDef
from chainlang.registry.spec import EventSpec, event_name_problem

__all__ = ["ToolSource", "derived_name", "tool_specs"]

#: What `tools=` holds: a function or bound method, a module, a module name or `.py`
#: path, or a mapping of event names to functions.
ToolSource = Union[Callable[..., Any], ModuleType, str, Mapping[str, Callable[..., Any]]]

_WORD = re.compile(r"[^a-z0-9_]+")


def derived_name(fn: Callable[..., Any]) -> str:
    """The event name of a plain function: `email_search` → `email.search`; `greet` in
    module `app.tools` → `tools.greet`."""
    name = _WORD.sub("_", getattr(fn, "__name__", "").lower()).strip("_")
    if "_" in name:
        namespace, _, action = name.partition("_")
        return f"{namespace}.{action.strip('_')}"
    module = (getattr(fn, "__module__", None) or "tools").rsplit(".", 1)[-1].lower()
    namespace = _WORD.sub("_", "main" if module == "__main__" else module).strip("_") or "tools"
    return f"{namespace}.{name}"


def tool_specs(tools: Sequence[ToolSource], base_dir: Path, *, origin: str = "given with tools=") -> list[EventSpec | HookDef]:
    """The events and hooks of `tools` (see the module's docstring). Raises ToolLoadError
    (one line, naming the item) for anything that is not a tool."""
    from chainlang.registry.loading import load_tools, module_items

    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise ToolLoadError(f"tools= takes a list (e.g. tools=[greet, 'mypkg.tools']), not a {type(tools).__name__}")
    found: list[EventSpec | HookDef] = []
    for item in tools:
        if isinstance(item, str):
            found.extend(load_tools([item], base_dir, origin=origin))
        elif isinstance(item, ModuleType):
            found.extend(module_items(item, origin))
        elif isinstance(item, Mapping):
            for name, fn in item.items():
                found.append(_function_spec(fn, name, origin))
        elif isinstance(item, HookDef):
            found.append(item.with_source(origin))
        elif isinstance(item, type):
            raise ToolLoadError(f"{item.__qualname__} ({origin}) is a class, not a tool: give a function, or the "
                                f"bound method of an instance (tools=[{item.__qualname__.lower()}.method])")
        elif callable(item):
            found.append(_function_spec(item, None, origin))
        else:
            raise ToolLoadError(f"{item!r} ({origin}) is not a tool: give a function, a bound method, a module, "
                                "a module name or a .py file")
    return found


def _function_spec(fn: Any, name: str | None, origin: str) -> EventSpec:
    label = getattr(fn, "__qualname__", None) or repr(fn)
    if not callable(fn) or isinstance(fn, type):
        raise ToolLoadError(f"{fn!r} ({origin}) is not a function")
    declared = spec_of(fn)
    if name is not None:
        problem = event_name_problem(name)
        if problem is not None:
            raise ToolLoadError(f"tools= {{{name!r}: {label}}}: {problem}")
    if declared is not None and not isinstance(fn, MethodType):
        return declared if name is None or name == declared.name else dataclasses.replace(declared, name=name)
    event_name = name or (declared.name if declared is not None else _name_after(fn, label, origin))
    try:
        if declared is not None:  # a bound method of an @event method: the same event, called on its object
            spec = build_spec(fn, event_name, description=declared.description, result=declared.result_schema,
                              idempotent=declared.idempotent, effects=dict(declared.effects))
        else:
            spec = build_spec(fn, event_name)
    except (TypeError, ValueError) as exc:
        raise ToolLoadError(f"{label} ({origin}): {exc}") from None
    if declared is None:  # named here: say which function, for a clash ("declared twice: in ... and in ...")
        spec = dataclasses.replace(spec, source=f"{getattr(fn, '__module__', '') or ''}.{label} ({origin})")
    elif inspect.ismethod(fn):
        spec = dataclasses.replace(spec, source=f"{getattr(fn, '__module__', '') or ''}")
    return spec


def _name_after(fn: Any, label: str, origin: str) -> str:
    """The event name derived from a plain function's name; ToolLoadError when it has no
    usable name (a lambda, a callable object) or when the name is a standard event's."""
    own = getattr(fn, "__name__", None)
    if not isinstance(own, str) or not own.isidentifier():  # a lambda's "<lambda>", a partial's none
        what = "a lambda" if own == "<lambda>" else f"{label}"
        raise ToolLoadError(f"{what} ({origin}) has no name to name an event after; give it one with a mapping: "
                            "tools=[{'app.action': fn}]")
    event_name = derived_name(fn)
    problem = event_name_problem(event_name)
    if problem is not None:
        raise ToolLoadError(f"{label} ({origin}): cannot name an event after it ({problem}); "
                            f"give it a name: tools=[{{'app.action': {own}}}]")
    from chainlang.registry.stdlib import stdlib_specs

    if any(spec.name == event_name for spec in stdlib_specs()):
        raise ToolLoadError(f"{label} ({origin}) would be the event {event_name!r}, which is a standard event of "
                            f"chainlang; give yours another name: tools=[{{'app.{event_name.partition('.')[2]}': "
                            f"{own}}}] (or rename the function)")
    return event_name
