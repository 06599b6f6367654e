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

__all__ = ["RECENT", "RESULT_CHARS", "THREAD_TOKENS", "capabilities", "chain", "decide", "fit_events", "think",
           "think_request", "thread_view"]

RECENT = 30  # the events of a thread a prompt shows (its last ones)...
THREAD_TOKENS = 1_000  # ...as many of them as fit in these tokens (estimated), the newest first
RESULT_CHARS = 1_200  # of one event's result in a prompt (longer ones are cut, and say so)
MAX_EVENTS_LISTED = 200  # events a prompt lists as capabilities


def thread_view(ctx: "RunContext", thread_id: str, family: str = "agent") -> dict[str, Any]:
    """A thread as a prompt shows it: its summary, status and last `RECENT` events, as many as
    fit in `THREAD_TOKENS` (`fit_events`). A thread that does not exist is the step's error,
    naming the known ones."""
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
    shown = fit_events(events, THREAD_TOKENS)
    view: dict[str, Any] = {"thread_id": thread.id, "summary": thread.summary, "status": thread.status,
                            "events": shown}
    if len(shown) < len(events):
        view["earlier_events_left_out"] = len(events) - len(shown)
    return view


def fit_events(events: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The events a prompt shows of `events` (oldest first), within `budget` tokens (estimated):
    the user's last message (`user.input`: what the turn is about) and the newest events
    that fit, in their order; a small model's context holds the newest events rather than
    the first ones. A result longer than `RESULT_CHARS` is cut (its start kept, as text); the
    newest event is always shown."""
    import json

    from chainlang.llm.tiers import estimate_tokens

    def shown(event: dict[str, Any]) -> tuple[dict[str, Any], int]:
        text = json.dumps(event.get("result"), ensure_ascii=False, default=str)
        if len(text) > RESULT_CHARS:
            event = {**event, "result": text[:RESULT_CHARS] + " …(cut)"}
        return event, estimate_tokens(json.dumps(event, ensure_ascii=False, default=str))

    asked = next((i for i in range(len(events) - 1, -1, -1) if events[i].get("event") == "user.input"), None)
    kept: dict[int, dict[str, Any]] = {}
    used = 0
    if asked is not None:
        kept[asked], used = shown(events[asked])
    for i in range(len(events) - 1, -1, -1):
        if i in kept:
            continue
        event, cost = shown(events[i])
        if kept and used + cost > budget:
            break
        kept[i] = event
        used += cost
    return [kept[i] for i in sorted(kept)]


def capabilities(ctx: "RunContext", with_params: bool = False) -> list[dict[str, Any]]:
    """The events a model may plan with (`_capabilities` of the run's registry and allow lists)."""
    return _capabilities(ctx.registry, ctx.allow, with_params)


def _capabilities(registry: Any, allow: tuple[tuple[str, ...], ...],
                  with_params: bool = False) -> list[dict[str, Any]]:
    """The events a model may plan with: the registry's (tools and chains; not external events,
    which no step can call), within the allow lists in force, by name; each with its name and
    the first sentence of its description (seed 001: the planner knows names and descriptions)."""
    from chainlang.llm.constrain import short_description

    if registry is None:
        return []
    out: list[dict[str, Any]] = []
    for spec in sorted(registry.specs(), key=lambda s: s.name):
        if spec.kind == "external" or not _allows(allow, spec.name):
            continue
        entry: dict[str, Any] = {"name": spec.name, "description": short_description(spec.description)}
        if with_params:
            entry["params"] = spec.params_schema
        out.append(entry)
        if len(out) >= MAX_EVENTS_LISTED:
            break
    return out


def _allows(allow: tuple[tuple[str, ...], ...], name: str) -> bool:
    """Whether every allow list in force lets `name` be called."""
    import fnmatch

    return all(any(fnmatch.fnmatchcase(name, p) for p in patterns) for patterns in allow)


def _models(ctx: "RunContext", event: str) -> Any:
    if ctx.models is None:
        raise ValueError(f"{event} needs the run's model tiers: run it with chainlang run or chainlang emit")
    return ctx.models


async def think(thread_id: str, ctx: "RunContext", prompt: str | None = None) -> dict[str, Any]:
    """The next event for a thread, from the heavy tier: `agent.reply` or `agent.chain`."""
    from chainlang.llm.prompting import PromptError
    from chainlang.llm.tiers import ModelRequest

    models = _models(ctx, "agent.think")
    import asyncio

    view = await asyncio.to_thread(thread_view, ctx, thread_id)  # the store's I/O off the event loop
    try:
        asked, schema = think_request(ctx.registry, ctx.allow, thread_id, view, prompt, ctx.project)
    except PromptError as exc:
        raise ValueError(str(exc)) from None
    said = next((e["result"].get("text") for e in reversed(view["events"]) if e.get("event") == "user.input"
                 and isinstance(e.get("result"), dict) and isinstance(e["result"].get("text"), str)), None)
    answer = await models.ask("heavy", ModelRequest("think", asked, schema, "next_event", last_input=said))
    return parse_answer(answer.text, schema, models.who("heavy"))  # type: ignore[no-any-return]


def think_request(registry: Any, allow: tuple[tuple[str, ...], ...], thread_id: str, view: dict[str, Any],
                  prompt: str | None, project: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """agent.think's request: its messages (the events it may plan with, the thread as data)
    and the schema of its answer, whose next events are agent.reply and, when the allow lists
    in force let it be called, agent.chain (chainlang.llm.constrain.think_answer_schema)."""
    from chainlang.llm.constrain import think_answer_schema
    from chainlang.llm.prompting import messages

    may_chain = registry is not None and registry.get("agent.chain") is not None and _allows(allow, "agent.chain")
    asked = messages("think", {"events": _capabilities(registry, allow) if may_chain else [], "may_chain": may_chain,
                               "thread_id": thread_id, "thread": view, "prompt": prompt}, project)
    return asked, think_answer_schema(may_chain)


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
    if not request.errors:  # with a condition too: invalid params make it a repair, valid ones are kept
        from chainlang.runtime.decide import validate_params

        import dataclasses

        request = dataclasses.replace(request, errors=validate_params(request.params_schema, params))
    try:
        from chainlang.runtime.decide.keep import applied

        decision = applied(request, await decider.decide(request))
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
