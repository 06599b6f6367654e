"""The events a run calls, each prepared once per run: its spec, its implementation and
the validators of its params and result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from chainlang.runtime.outcomes import EventUnavailable

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry
    from chainlang.registry.spec import EventSpec


RUN_BY_INTERPRETER = frozenset({"chain.run", "agent.chain"})  # they need the run, not a function


@dataclass
class EventRuntime:
    """One event as the interpreter calls it, prepared once per run (not per step)."""

    spec: "EventSpec"
    func: Callable[..., Any] | None
    is_async: bool
    accepts_ctx: bool
    check_params: Callable[[Any], list[str]]
    check_result: Callable[[Any], list[str]] | None

    @property
    def direct(self) -> bool:
        """An async tool without `ctx`: awaited as it is."""
        return self.is_async and not self.accepts_ctx and self.func is not None

    @property
    def runs_chain(self) -> bool:
        """A named chain, `chain.run` or `agent.chain`: run as a sub-chain, not called."""
        return self.spec.kind == "chain" or self.spec.name in RUN_BY_INTERPRETER


def prepare_event(registry: "Registry", name: str) -> EventRuntime:
    """Resolve an event's implementation and build its validators, once per run."""
    from chainlang.registry.errors import ImplementationError

    spec = registry.get(name)
    if spec is None:
        raise EventUnavailable(f"{name} is not a known event")
    func = None
    is_async = accepts = False
    if spec.kind == "tool" and name not in RUN_BY_INTERPRETER:
        try:
            spec = spec.resolved()
        except ImplementationError as exc:
            raise EventUnavailable(str(exc)) from None
        func, is_async, accepts = spec.func, spec.is_async, spec.accepts_ctx
    elif spec.kind == "external":
        raise EventUnavailable(f"{name} is an external event: it has no tool behind it and cannot be a step "
                               f"(fire it with chainlang emit {name} --data JSON)")
    return EventRuntime(
        spec=spec, func=func, is_async=is_async, accepts_ctx=accepts,
        check_params=schema_checker(spec.params_schema),
        check_result=schema_checker(spec.result_schema) if spec.result_schema else None,
    )


def schema_checker(schema: dict[str, Any]) -> Callable[[Any], list[str]]:
    """`check(value)` → the validation messages (empty when valid): the exact fast check
    answers "valid" for the common schemas; jsonschema explains what is not."""
    from chainlang.schemas.cache import checker

    return checker(schema)
