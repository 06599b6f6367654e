"""`EventSpec`: what the registry knows about one event.

An event is a tool (a Python function, or a stdlib declaration pointing at
one), an external event (declared with a payload schema, fired from
outside), or a named chain. Every event has a JSON Schema (draft-07) for its
params and may have one for its result.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal

from chainlang.registry.errors import ImplementationError

EventKind = Literal["tool", "external", "chain"]

EVENT_NAME_PATTERN = r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+"
EVENT_NAME_RE = re.compile(EVENT_NAME_PATTERN)

# `package.module:function` (the function may be a dotted attribute path)
_POINTER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")

EMPTY_PARAMS: Mapping[str, Any] = MappingProxyType(
    {"type": "object", "properties": {}, "additionalProperties": False}
)


def is_event_name(name: object) -> bool:
    """True for a dotted lowercase event name: `namespace.action` or deeper."""
    return isinstance(name, str) and EVENT_NAME_RE.fullmatch(name) is not None


def event_name_problem(name: object) -> str | None:
    """Why `name` is not a valid event name (None when it is)."""
    if not isinstance(name, str):
        return f"an event name must be a string, not {type(name).__name__}"
    if is_event_name(name):
        return None
    if "." not in name:
        return (
            f"{name!r} is not a valid event name: it needs a namespace, e.g. 'myapp.{name.lower() or 'action'}' "
            "(words without a dot are reserved keywords)"
        )
    if name != name.lower():
        return f"{name!r} is not a valid event name: use lowercase ({name.lower()!r})"
    return (
        f"{name!r} is not a valid event name: use dotted lowercase like 'email.search' "
        "(each part [a-z][a-z0-9_]*, at least two parts)"
    )


def validate_event_name(name: object) -> str:
    """Return `name` if valid, else raise ValueError with a clear message."""
    problem = event_name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(name, str)
    return name


def is_implementation_pointer(value: object) -> bool:
    """True for a `package.module:function` string."""
    return isinstance(value, str) and _POINTER_RE.fullmatch(value) is not None


@dataclass(frozen=True)
class EventSpec:
    """One registered event.

    `params_schema` and `result_schema` are plain draft-07 JSON Schema dicts;
    treat them as read-only. For an external event the declared payload schema
    is both `params_schema` and `result_schema` (post: hooks see the payload
    as the result).
    """

    name: str
    params_schema: dict[str, Any]
    description: str = ""
    result_schema: dict[str, Any] | None = None
    kind: EventKind = "tool"
    idempotent: bool = False
    # other effect flags; the stdlib uses side_effects, reads_clock, uses_model,
    # reads_store, writes_store (all booleans), and model_calls (a whole number, see below)
    effects: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    implementation: str | None = None  # `package.module:function`, imported on demand
    func: Callable[..., Any] | None = field(default=None, repr=False)
    source: str = ""  # `stdlib/tools.yaml`, a module name, a tools file, a chain file
    accepts_ctx: bool = False
    is_async: bool = False

    def __hash__(self) -> int:  # the schemas are dicts: hash what identifies the event
        return hash((self.name, self.kind, self.source))

    def __post_init__(self) -> None:
        if not isinstance(self.effects, MappingProxyType):
            object.__setattr__(self, "effects", MappingProxyType(dict(self.effects)))

    @property
    def model_calls(self) -> int:
        """The model calls the event makes each time it runs, at least: its `model_calls`
        effect (0 when it declares none, or a value that is not a whole number >= 0).
        The budget check (CL036) adds these up over a chain's worst case."""
        value = self.effects.get("model_calls", 0)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    # -- constructors for the other kinds --------------------------------

    @classmethod
    def external_event(
        cls,
        name: str,
        payload_schema: Mapping[str, Any] | None = None,
        *,
        description: str = "",
        source: str = "",
    ) -> EventSpec:
        """An event that arrives from outside (`email.received`): no tool behind it.

        The payload schema is both its params and its result schema. Without a
        payload schema the payload is any object.
        """
        schema = dict(payload_schema) if payload_schema is not None else {"type": "object"}
        return cls(
            name=name,
            params_schema=schema,
            result_schema=schema,
            description=description,
            kind="external",
            source=source,
        )

    @classmethod
    def chain_event(
        cls,
        name: str,
        inputs: Mapping[str, Mapping[str, Any]] | None = None,
        outputs: Mapping[str, object] | None = None,
        *,
        description: str = "",
        source: str = "",
    ) -> EventSpec:
        """A named chain callable as an event: its inputs are the params (an
        input without a `default` is required), its outputs the result's keys."""
        properties = {key: dict(value) for key, value in (inputs or {}).items()}
        params: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        required = [key for key, value in properties.items() if "default" not in value]
        if required:
            params["required"] = required
        result: dict[str, Any] | None = None
        if outputs is not None:
            result = {
                "type": "object",
                "properties": {key: {} for key in outputs},
                "required": list(outputs),
                "additionalProperties": False,
            }
        return cls(
            name=name,
            params_schema=params,
            result_schema=result,
            description=description,
            kind="chain",
            source=source,
        )

    # -- implementation ----------------------------------------------------

    @cached_property
    def implemented(self) -> bool:
        """Whether running this event can work.

        A chain is run by the interpreter; an external event has no tool; a tool
        is implemented when it has a Python function, or an `implementation`
        pointer whose module can be found (without importing it; if the module
        is already imported, the function must also exist).
        """
        if self.kind == "chain":
            return True
        if self.kind == "external":
            return False
        if self.func is not None:
            return True
        if self.implementation is None or not is_implementation_pointer(self.implementation):
            return False
        module_name, _, attribute = self.implementation.partition(":")
        try:
            found = importlib.util.find_spec(module_name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return False
        module = sys.modules.get(module_name)
        if module is None and module_name.startswith("chainlang.stdlib."):
            module = importlib.import_module(module_name)  # our own, small: a module may implement part of a namespace
        if module is not None:
            return _lookup(module, attribute) is not None
        return True

    def resolve_implementation(self) -> Callable[..., Any]:
        """The Python callable behind this tool, importing its module now.

        Raises ImplementationError (a one-line message) when there is none.
        """
        if self.func is not None:
            return self.func
        if self.kind == "external":
            raise ImplementationError(
                f"event '{self.name}' is an external event: it has no implementation and is fired from outside "
                f"(chainlang emit {self.name} --data JSON)"
            )
        if self.kind == "chain":
            raise ImplementationError(
                f"event '{self.name}' is a chain ({self.source}): the interpreter runs it, it has no Python implementation"
            )
        if self.implementation is None:
            raise ImplementationError(f"event '{self.name}' is not implemented yet (declared in {self.source or 'unknown source'})")
        if not is_implementation_pointer(self.implementation):
            raise ImplementationError(
                f"event '{self.name}': implementation {self.implementation!r} is not of the form 'package.module:function'"
            )
        module_name, _, attribute = self.implementation.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                raise ImplementationError(
                    f"event '{self.name}' is not implemented yet: module '{module_name}' does not exist "
                    f"(implementation {self.implementation})"
                ) from None
            raise ImplementationError(
                f"event '{self.name}': importing '{module_name}' failed: {type(exc).__name__}: {exc}"
            ) from None
        except Exception as exc:  # an error inside the implementation module
            raise ImplementationError(
                f"event '{self.name}': importing '{module_name}' failed: {type(exc).__name__}: {exc}"
            ) from None
        target = _lookup(module, attribute)
        if target is None:
            raise ImplementationError(
                f"event '{self.name}' is not implemented yet: '{module_name}' has no '{attribute}' "
                f"(implementation {self.implementation})"
            )
        if not callable(target):
            raise ImplementationError(f"event '{self.name}': implementation {self.implementation} is not callable")
        return target  # type: ignore[no-any-return]

    def resolved(self) -> EventSpec:
        """A copy with `func`, `is_async` and `accepts_ctx` filled from the
        resolved implementation (raises ImplementationError like
        `resolve_implementation`)."""
        if self.func is not None:
            return self
        return self._resolved_copy

    @cached_property
    def _resolved_copy(self) -> EventSpec:
        # once per spec: a serve fires thousands of runs with the same registry
        func = self.resolve_implementation()
        return dataclasses.replace(
            self,
            func=func,
            is_async=is_async_callable(func),
            accepts_ctx=accepts_ctx(func),
        )

    # -- presentation ------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The JSON form used by `chainlang events --json` / `describe --json`."""
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "params": self.params_schema,
            "result": self.result_schema,
            "idempotent": self.idempotent,
            "effects": dict(self.effects),
            "implementation": self.implementation,
            "implemented": self.implemented,
            "source": self.source,
        }


def _lookup(module: object, dotted: str) -> Any:
    target: Any = module
    for part in dotted.split("."):
        target = getattr(target, part, None)
        if target is None:
            return None
    return target


def is_async_callable(func: Callable[..., Any]) -> bool:
    """True for `async def` functions (also behind functools.partial, or as an
    object's `async def __call__`)."""
    while isinstance(func, functools.partial):
        func = func.func
    if inspect.iscoroutinefunction(func):
        return True
    call = inspect.getattr_static(type(func), "__call__", None)
    return inspect.iscoroutinefunction(call)


def accepts_ctx(func: Callable[..., Any]) -> bool:
    """True when `func` has a parameter named `ctx` (it receives the run context)."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return False
    return signature_accepts_ctx(signature)


def signature_accepts_ctx(signature: inspect.Signature) -> bool:
    """`accepts_ctx` of a signature already read (names and kinds do not depend on whether
    its annotations were evaluated)."""
    ctx = signature.parameters.get("ctx")
    return ctx is not None and ctx.kind in (ctx.POSITIONAL_OR_KEYWORD, ctx.KEYWORD_ONLY)
