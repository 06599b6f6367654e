"""The `agent` standard events (LANGUAGE.md §13): `agent.think` plans with the heavy tier,
`agent.decide` is the decide model as a step; `agent.chain` is run by the interpreter
(chainlang.runtime.agent_chain), like `chain.run`.

Every answer is validated against the event's result schema before it is used: a model's
text is untrusted input. What the model reads of a thread or a tool's result reaches it as
delimited data (chainlang.llm.prompting), never as instructions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.llm.answers import parse_answer
from chainlang.stdlib.projectstore import open_store, project_of

if TYPE_CHECKING:
    from chainlang.runtime.context import RunContext

__all__ = ["RECENT", "capabilities", "chain", "decide", "think", "thread_view"]

RECENT = 30  # the events of a thread a prompt shows (its last ones)
MAX_EVENTS_LISTED = 200  # events a prompt lists as capabilities


def thread_view(ctx: "RunContext", thread_id: str, family: str = "agent") -> dict[str, Any]:
    """A thread as a prompt shows it: its summary, status and last `RECENT` events. A thread
    that does not exist is the step's error, naming the known ones."""
    from chainlang.stdlib.thread import unknown_thread

    from chainlang.store import StoreError

    with open_store(project_of(ctx, family)) as store:
        try:
            thread = store.get_thread(thread_id)
            if thread is None:
                raise ValueError(unknown_thread(thread_id, store.list_threads()))
            events = [{"event": e.event, "result": e.result, "at": e.at, **({"key": e.key} if e.key else {})}
                      for e in store.thread_events(thread_id, limit=RECENT)]
        except StoreError as exc:
            raise ValueError(f"{exc}") from None
    return {"thread_id": thread.id, "summary": thread.summary, "status": thread.status, "events": events}


def capabilities(ctx: "RunContext", with_params: bool = False) -> list[dict[str, Any]]:
    """The events a model may plan with: the run's registry (tools and chains; not external
    events, which no step can call), within the allow lists in force, by name."""
    import fnmatch

    registry = ctx.registry
    if registry is None:
        return []
    out: list[dict[str, Any]] = []
    for spec in sorted(registry.specs(), key=lambda s: s.name):
        if spec.kind == "external":
            continue
        if not all(any(fnmatch.fnmatchcase(spec.name, p) for p in patterns) for patterns in ctx.allow):
            continue
        entry: dict[str, Any] = {"name": spec.name, "description": " ".join((spec.description or "").split())[:300]}
        if with_params:
            entry["params"] = spec.params_schema
        out.append(entry)
        if len(out) >= MAX_EVENTS_LISTED:
            break
    return out


def _models(ctx: "RunContext", event: str) -> Any:
    if ctx.models is None:
        raise ValueError(f"{event} needs the run's model tiers: run it with chainlang run or chainlang emit")
    return ctx.models


async def think(thread_id: str, ctx: "RunContext", prompt: str | None = None) -> dict[str, Any]:
    """The next event for a thread, from the heavy tier: `agent.reply` or `agent.chain`."""
    from chainlang.llm.prompting import PromptError, messages
    from chainlang.llm.tiers import ModelRequest

    models = _models(ctx, "agent.think")
    import asyncio

    view = await asyncio.to_thread(thread_view, ctx, thread_id)  # the store's I/O off the event loop
    schema = ctx.registry.get("agent.think").result_schema
    try:
        asked = messages("think", {"events": capabilities(ctx), "thread_id": thread_id, "thread": view,
                                   "prompt": prompt}, ctx.project)
    except PromptError as exc:
        raise ValueError(str(exc)) from None
    answer = await models.ask("heavy", ModelRequest("think", asked, schema, "next_event"))
    return parse_answer(answer.text, schema, models.who("heavy"))  # type: ignore[no-any-return]


async def decide(event: str, params: dict[str, Any], ctx: "RunContext", description: str = "",
                 schema: dict[str, Any] | None = None, errors: list[str] | None = None,
                 condition: str | None = None) -> dict[str, Any]:
    """A decision for a step described by the params: the run's decider (the embedded one,
    then the light tier, then the fallback), as a step of its own."""
    from chainlang.runtime.decide import DecideRequest, DecisionNeeded

    decider = ctx.decider
    if decider is None:
        raise ValueError("agent.decide needs the run's decider: run it with chainlang run or chainlang emit")
    spec = ctx.registry.get(event) if ctx.registry is not None else None
    request = DecideRequest(
        event=event, description=description or (spec.description if spec is not None else ""),
        params_schema=schema if schema is not None else (spec.params_schema if spec is not None else {}),
        params=params, errors=list(errors or []), condition=condition, models=_models(ctx, "agent.decide"))
    if not request.errors and condition is None and spec is not None:
        from chainlang.runtime.decide import validate_params

        import dataclasses

        request = dataclasses.replace(request, errors=validate_params(request.params_schema, params))
    try:
        decision = await decider.decide(request)
    except DecisionNeeded as exc:
        raise ValueError(str(exc)) from None
    out: dict[str, Any] = {"action": decision.action}
    if decision.action == "continue":
        chosen = decision.params if decision.params is not None else params
        from chainlang.runtime.decide import validate_params

        problems = validate_params(request.params_schema, chosen)
        if problems:  # validated again, as a step's decision is (§5): no repair loop
            raise ValueError(f"agent.decide: the decision's params for {event} are still invalid: "
                             + "; ".join(problems[:3]))
        out["params"] = chosen
    return out


def chain(**params: Any) -> Any:
    raise RuntimeError("agent.chain is run by the chainlang interpreter; it cannot be called as a function")
