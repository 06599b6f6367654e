"""The `@event` decorator: turn a plain Python function into a chainlang tool.

```python
from chainlang import event

@event("email.search", description="Search the mailbox")
async def email_search(query: str, days: int = 7, ctx=None) -> dict:
    ...
```

The decorator only attaches an `EventSpec` to the function (as
`fn.__chainlang_event__`) and returns the function unchanged. It registers
nothing globally: a registry collects decorated functions from the modules
listed in `chainlang.toml` or given with `--tools` (see `load_tools`).

Calling convention (for the interpreter): the tool is called with its params
as keyword arguments, plus `ctx=<run context>` when it has a `ctx`
parameter; sync and async functions both work.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from chainlang.schemas.from_python import (
    is_pydantic_model,
    is_uninformative,
    model_schema,
    schema_problem,
    type_schema,
)
from chainlang.schemas.signatures import NO_DEFAULT
from chainlang.schemas.signatures import annotation_schema as fast_annotation_schema
from chainlang.schemas.signatures import params_schema as fast_params_schema
from chainlang.registry.spec import (
    EventSpec,
    event_name_problem,
    is_async_callable,
    signature_accepts_ctx,
)

F = TypeVar("F", bound=Callable[..., Any])

SPEC_ATTRIBUTE = "__chainlang_event__"

__all__ = ["SPEC_ATTRIBUTE", "event", "spec_of"]


def event(
    name: str,
    *,
    description: str | None = None,
    params: type[Any] | Mapping[str, Any] | None = None,
    result: Any = None,
    idempotent: bool = False,
    **effects: object,
) -> Callable[[F], F]:
    """Declare a function as the tool behind event `name`.

    - `params`: a pydantic model class or a JSON Schema (object) dict; by
      default the schema is derived from the signature (a parameter named
      `ctx` receives the run context and is not a param).
    - `result`: a pydantic model class, a type annotation or a JSON Schema
      dict; by default derived from the return annotation when it is precise
      (not `dict`, `Any` or missing).
    - `description`: defaults to the first line of the docstring.
    - `idempotent` and other keyword flags (`side_effects=True`,
      `reads_clock=True`...) describe the tool's effects; `model_calls=N`
      says the tool makes at least N model calls each time it runs (the
      budget check counts them against `limits.max_model_calls`).

    Raises ValueError at decoration time for a bad name or schema.
    """
    if callable(name) and not isinstance(name, str):
        raise TypeError("@event needs an event name: write @event('namespace.action', ...) above the function")
    problem = event_name_problem(name)
    if problem is not None:
        raise ValueError(f"@event: {problem}")
    for flag, value in effects.items():
        if not isinstance(value, (bool, int, float, str)):
            raise TypeError(
                f"@event({name!r}): effect flag {flag}= must be a bool, number or string, not {type(value).__name__}"
            )
    calls = effects.get("model_calls", 0)
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
        raise TypeError(f"@event({name!r}): model_calls= must be a whole number >= 0 "
                        "(the model calls the tool makes each time it runs, at least)")
    if not isinstance(idempotent, bool):
        raise TypeError(f"@event({name!r}): idempotent= must be True or False")

    def decorate(fn: F) -> F:
        if isinstance(fn, type) or not callable(fn):
            raise TypeError(f"@event({name!r}) decorates a function, not {type(fn).__name__}")
        previous = spec_of(fn)
        if previous is not None:
            raise ValueError(
                f"@event({name!r}): {getattr(fn, '__qualname__', fn)!s} is already the tool of '{previous.name}'; "
                "one function implements one event (wrap it in a second function for an alias)"
            )
        # names local to the defining function (a class defined there), for
        # string annotations (`from __future__ import annotations`)
        frame = sys._getframe(1)
        localns = dict(frame.f_locals) if frame.f_locals is not frame.f_globals else None
        del frame
        spec = build_spec(
            fn,
            name,
            description=description,
            params=params,
            result=result,
            idempotent=idempotent,
            effects=effects,
            localns=localns,
        )
        try:
            setattr(fn, SPEC_ATTRIBUTE, spec)
        except (AttributeError, TypeError):
            raise TypeError(f"@event({name!r}): cannot attach the event to {fn!r}; decorate a plain function") from None
        return fn

    return decorate


def spec_of(obj: object) -> EventSpec | None:
    """The EventSpec attached to a decorated function, or None."""
    try:
        spec = getattr(obj, SPEC_ATTRIBUTE, None)
    except Exception:  # objects with exotic __getattr__
        return None
    return spec if isinstance(spec, EventSpec) else None


def build_spec(
    fn: Callable[..., Any],
    name: str,
    *,
    description: str | None = None,
    params: type[Any] | Mapping[str, Any] | None = None,
    result: Any = None,
    idempotent: bool = False,
    effects: Mapping[str, object] | None = None,
    localns: Mapping[str, Any] | None = None,
) -> EventSpec:
    """The EventSpec for `fn` (what `@event` attaches). `localns` resolves
    string annotations that name things local to the defining function."""
    label = f"@event({name!r}) on {getattr(fn, '__qualname__', repr(fn))}"
    signature = _signature(fn, label, localns)

    if params is None:
        params_schema = _params_from_signature(signature, label)
    else:
        params_schema = _explicit_params(params, label)
        _check_compatible(signature, params_schema, label)

    if result is not None:
        result_schema: dict[str, Any] | None = _explicit_schema(result, label, "result")
    else:
        result_schema = _result_from_annotation(signature.return_annotation)

    if description is None:
        doc = inspect.getdoc(fn) or ""
        description = next((line.strip() for line in doc.splitlines() if line.strip()), "")

    return EventSpec(
        name=name,
        description=description,
        params_schema=params_schema,
        result_schema=result_schema,
        kind="tool",
        idempotent=idempotent,
        effects=dict(effects or {}),
        implementation=None,
        func=fn,
        source=getattr(fn, "__module__", None) or "",
        accepts_ctx=signature_accepts_ctx(signature),  # the signature read above: not read again
        is_async=is_async_callable(fn),
    )


# -- internals --------------------------------------------------------------


def _signature(fn: Callable[..., Any], label: str, localns: Mapping[str, Any] | None = None) -> inspect.Signature:
    try:
        return inspect.signature(fn, eval_str=True, locals=localns)
    except NameError as exc:
        raise ValueError(f"{label}: cannot resolve a type annotation ({exc}); import the type at module level") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{label}: cannot read the signature: {exc}") from None
    except Exception as exc:
        raise ValueError(f"{label}: cannot resolve the annotations: {type(exc).__name__}: {exc}") from None


def _params_from_signature(signature: inspect.Signature, label: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    open_params = False
    for parameter in signature.parameters.values():
        if parameter.name == "ctx":
            continue
        if parameter.kind is parameter.VAR_POSITIONAL:
            raise ValueError(f"{label}: *{parameter.name} is not supported: tools receive params as keyword arguments")
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise ValueError(
                f"{label}: parameter '{parameter.name}' is positional-only: tools receive params as keyword arguments"
            )
        if parameter.kind is parameter.VAR_KEYWORD:
            open_params = True
            continue
        if parameter.name.startswith("_"):
            raise ValueError(f"{label}: parameter '{parameter.name}' starts with '_': param names must not")
        annotation = Any if parameter.annotation is parameter.empty else parameter.annotation
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)

    # simple signatures without pydantic (the same schema, in microseconds instead of milliseconds)
    schema = fast_params_schema(
        (name, annotation, NO_DEFAULT if default is ... else default) for name, (annotation, default) in fields.items()
    )
    if schema is None:
        schema = _params_with_pydantic(fields, label)
    schema.setdefault("properties", {})
    if open_params:  # **kwargs: any other param is accepted
        schema.pop("additionalProperties", None)
    else:
        schema["additionalProperties"] = False
    return schema


def _params_with_pydantic(fields: dict[str, Any], label: str) -> dict[str, Any]:
    from pydantic import ConfigDict, create_model

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. a param named `json` shadowing a BaseModel attribute
            model = create_model(
                "Params",
                __config__=ConfigDict(protected_namespaces=(), arbitrary_types_allowed=False),
                **fields,
            )
        schema = model_schema(model)
    except Exception as exc:
        raise ValueError(
            f"{label}: cannot derive a params schema from the signature: {type(exc).__name__}: {_first_line(exc)} "
            "(annotate params with JSON types, or pass params= a pydantic model or JSON Schema)"
        ) from None
    return schema


def _explicit_params(params: object, label: str) -> dict[str, Any]:
    schema = _explicit_schema(params, label, "params")
    if schema.get("type") != "object":
        raise ValueError(f"{label}: params= must describe an object (\"type\": \"object\"), got {schema.get('type')!r}")
    return schema


def _explicit_schema(value: object, label: str, what: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        schema = _plain(value)
        problem = schema_problem(schema)
        if problem is not None:
            raise ValueError(f"{label}: {what}= is not a valid JSON Schema (draft-07): {problem}")
        return schema
    try:
        if is_pydantic_model(value):
            assert isinstance(value, type)
            return model_schema(value)
        if what == "params":
            raise ValueError(f"{label}: params= must be a pydantic model class or a JSON Schema dict")
        return type_schema(value)
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"{label}: cannot build the {what} schema: {type(exc).__name__}: {_first_line(exc)}") from None


def _result_from_annotation(annotation: Any) -> dict[str, Any] | None:
    if annotation is inspect.Signature.empty or annotation is Any or annotation is object:
        return None
    schema = fast_annotation_schema(annotation)  # simple annotations without pydantic
    if schema is not None:
        return None if is_uninformative(schema) else schema
    try:
        schema = type_schema(annotation)
    except Exception:  # a return type pydantic cannot describe: no result schema
        return None
    return None if is_uninformative(schema) else schema


def _check_compatible(signature: inspect.Signature, schema: Mapping[str, Any], label: str) -> None:
    """With an explicit params schema, the function must accept those params as keywords."""
    parameters = {p.name: p for p in signature.parameters.values() if p.name != "ctx"}
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        return
    keyword_names = {
        n for n, p in parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    properties = schema.get("properties") or {}
    unknown = [key for key in properties if key not in keyword_names]
    if unknown:
        raise ValueError(
            f"{label}: params declares {', '.join(map(repr, unknown))} but the function has no such parameter "
            "(add it, or a **kwargs parameter)"
        )
    missing = [
        n
        for n, p in parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty and n not in properties
    ]
    if missing:
        raise ValueError(
            f"{label}: parameter {', '.join(map(repr, missing))} has no default and is not in the params schema"
        )


def _plain(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep plain-dict/list copy of a JSON Schema mapping."""

    def convert(node: Any) -> Any:
        if isinstance(node, Mapping):
            return {str(k): convert(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [convert(v) for v in node]
        return node

    return convert(value)  # type: ignore[no-any-return]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
