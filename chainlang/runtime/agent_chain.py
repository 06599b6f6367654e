"""`agent.chain` (LANGUAGE.md §13): a chain written by the fast model, checked, then run.

The most dangerous input the system has is a chain a small model wrote; it gets no more
power than a chain the user wrote, and less:

1. The model is asked (fast tier) with the plan as delimited data and the events it may use
   (those the allow lists in force let through, the most relevant to the plan first, as compact
   signatures). It answers `{"chain": [STEP, ...]}` — steps only: no hooks, limits, inputs or
   allow list of its own — and the request's schema (`chainlang.llm.constrain`) lets an
   endpoint that enforces it write only steps `{"event": NAME, "params": {...}}` of those
   events, or parallel groups of them, at most one more than the plan has steps.
2. chainlang builds the chain document itself around those steps, with an `allow` list of
   exactly the events the caller may call, and checks it with the same loader and checker
   as a chain file of the project. Its errors go back to the model for at most
   `max_repairs` new tries (each a model call, budgeted and recorded); a chain still
   invalid fails the step with them.
3. A valid chain runs as a sub-chain (depth + 1) under the caller's allow lists, hooks and
   the run's budgets; its steps are recorded under the step's path (`4/1`, `4/2`...), so a
   resume replays the recorded answers and the steps that finished.
4. The closing `agent.think` (seed 001: "always appends agent.think at chain end"): when the
   plan asks for an answer, chainlang adds it itself (`closes_with_think`), so the chain's last
   result is the reply.
"""

from __future__ import annotations

import fnmatch
import json
from typing import TYPE_CHECKING, Any

from chainlang.runtime.outcomes import ChainFailed, LimitExceeded, error_of

if TYPE_CHECKING:
    from chainlang.runtime.events import EventRuntime
    from chainlang.runtime.walk import ChainRun

__all__ = ["ANSWER_SCHEMA", "CLOSING_THINK", "MAX_STEPS", "allowed_events", "chain_request", "closes_with_think",
           "run_agent_chain"]

MAX_STEPS = 100  # top-level steps of a model-written chain
# what an answer is read as: any step form of the language (the schema the request sends is
# narrower, `chain_request`; the checker says what is wrong with a step, better than a schema)
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"chain": {"type": "array", "minItems": 1, "maxItems": MAX_STEPS,
                             "items": {"type": ["string", "object", "array"]}}},
    "required": ["chain"],
    "additionalProperties": False,
}
CLOSING_THINK: dict[str, Any] = {"agent.think": {"thread_id": "{run.thread}"}}


async def run_agent_chain(caller: "ChainRun", rt: "EventRuntime", params: dict[str, Any], ipath: str,
                          attempt: int = 1) -> Any:
    from chainlang.llm.constrain import from_answer
    from chainlang.llm.prompting import PromptError, render
    from chainlang.llm.tiers import ModelRequest
    from chainlang.runtime.models import ModelUnavailable
    from chainlang.runtime.walk import ChainRun
    from chainlang.llm.answers import parse_answer

    run = caller.run
    if caller.depth + 1 > caller.depth_limit:
        raise LimitExceeded("max_depth", f"step {ipath} would run agent.chain's chain at depth {caller.depth + 1}, "
                                         f"beyond max_depth = {caller.depth_limit}")
    if run.models is None or run.load_chain is None or not hasattr(run.load_chain, "from_text"):
        raise ChainFailed(error_of("chain", "agent.chain needs a run of a project: chainlang run or chainlang emit"))
    plan = str(params.get("plan", ""))
    max_repairs = int(params.get("max_repairs", 2))
    allowed = allowed_events(run.registry, caller.allow)
    models = run.models.for_step(ipath, "agent.chain")
    try:
        conversation, schema = chain_request(run.registry, allowed, plan, run.project)
    except PromptError as exc:
        raise ChainFailed(error_of("chain", str(exc))) from None
    closing = closes_with_think(plan, allowed, run.facts.get("thread"), caller.graph)
    name = str((run.project or run.state_dir) / f"agent-chain-{ipath.replace('/', '_')}.chain.yaml")
    repairs = 0
    while True:
        task = "chain" if repairs == 0 else "repair"
        try:
            answer = await models.ask("fast", ModelRequest(task, list(conversation), schema, "chain"))
        except ModelUnavailable as exc:
            raise ChainFailed(error_of("model", str(exc))) from None
        steps: list[Any] = []
        appended = False
        try:
            steps = from_answer(parse_answer(answer.text, ANSWER_SCHEMA, models.who("fast"))["chain"])
            if closing and not _ends_with_think(steps):
                steps, appended = [*steps, CLOSING_THINK], True
            problems = _parallel_problems(steps, caller.default_parallel)
            graph, text = None, _document(steps, allowed)
            if not problems:
                graph, problems = run.load_chain.from_text(name, text)
        except ValueError as exc:
            graph, problems = None, [str(exc)]
        if graph is not None:
            break
        if repairs >= max_repairs:
            shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
            raise ChainFailed(error_of("chain", (
                f"the chain {models.who('fast')} wrote was refused by the checker"
                f"{f' after {repairs} repairs' if repairs else ''} (max_repairs = {max_repairs}): {shown}")))
        try:
            again = render("chain.repair.j2", {"problems": problems[:20]}, run.project)
        except PromptError as exc:
            raise ChainFailed(error_of("chain", str(exc))) from None
        conversation += [{"role": "assistant", "content": answer.text}, {"role": "user", "content": again}]
        repairs += 1
    # a retry's chain is another chain (the model answered again): its steps get paths of their
    # own (`4#2/1`), so a resume never takes the first attempt's steps for its own
    prefix = f"{ipath}/" if attempt == 1 else f"{ipath}#{attempt}/"
    elsewhere = None  # the Temporal engine runs it as a child workflow (None: here)
    if run.run_written is not None:
        elsewhere = await run.run_written(caller, text, name, prefix, ipath, attempt)
    if elsewhere is not None:
        status, error, last = elsewhere
    else:
        if run.read_ahead is not None:  # the Temporal engine reads its thread references first
            await run.read_ahead([graph])
        sub = ChainRun(run, graph, {}, depth=caller.depth + 1, prefix=prefix, allow=caller.allow,
                       depth_limit=caller.depth_limit, hooks=caller.hooks, stack=caller.stack,
                       hook_inputs=caller.hook_inputs)
        sub.default_parallel = min(sub.default_parallel, caller.default_parallel)  # no wider than the caller's
        status, _outputs, error = await sub.execute()
        last = last_result(sub)
    if status == "failed":
        where = f" at step {error.get('step')}" if error and error.get("step") else ""
        raise ChainFailed(error_of("chain", f"the chain agent.chain wrote failed{where}: "
                                            f"{(error or {}).get('message', '')}"))
    return {"chain": steps, "result": last, "repairs": repairs, "appended": appended}


def chain_request(registry: Any, allowed: list[str], plan: str,
                  project: Any = None) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """agent.chain's first request: its messages (the plan as data; the allowed events most
    relevant to it, at most `MAX_LISTED`, as signatures) and the schema its answer must match."""
    from chainlang.llm.constrain import chain_answer_schema, plan_length, rank_events, short_description, signature
    from chainlang.llm.prompting import messages

    # agent.chain itself is not offered: a small model asked to translate a plan takes it for a
    # step and writes a chain that writes a chain (the checker still accepts one written by hand)
    specs = {spec.name: spec for spec in registry.specs() if spec.name in set(allowed) and spec.name != "agent.chain"}
    listed = [specs[name] for name in rank_events([(n, s.description or "") for n, s in sorted(specs.items())],
                                                  plan)]
    events = [{"name": spec.name, "signature": signature(spec.name, spec.params_schema),
               "description": short_description(spec.description)} for spec in listed]
    schema = chain_answer_schema([(spec.name, spec.params_schema) for spec in listed],
                                 min(MAX_STEPS, plan_length(plan)))  # a step more and a small model adds one
    return messages("chain", {"events": events, "plan": plan}, project), schema


def closes_with_think(plan: str, allowed: list[str], thread: Any, graph: Any) -> bool:
    """Whether agent.chain adds the closing `agent.think {thread_id: "{run.thread}"}` to the
    chain the model wrote (when it does not end with agent.think already): the run is attached
    to a thread (the answer goes there), the caller may call agent.think, the plan asks for an
    answer (`asks_for_answer`), and the calling chain does not think itself after its
    agent.chain step (a turn written as think, chain, think closes itself: it would think twice)."""
    from chainlang.llm.constrain import asks_for_answer

    return (bool(thread) and "agent.think" in allowed and asks_for_answer(plan)
            and not _thinks_after_chain(graph.nodes))


def _thinks_after_chain(nodes: Any) -> bool:
    """Whether an agent.think step comes after an agent.chain step, in the order the steps are written."""
    seen_chain = False
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        if node.event == "agent.chain":
            seen_chain = True
        elif node.event == "agent.think" and seen_chain:
            return True
        stack.extend(reversed([*getattr(node, "children", ()), *getattr(node, "else_", ())]))
    return False


def _ends_with_think(steps: list[Any]) -> bool:
    last = steps[-1] if steps else None
    return last == "agent.think" or isinstance(last, dict) and (
        last.get("event") == "agent.think" or "agent.think" in last)


def allowed_events(registry: Any, lists: tuple[tuple[str, ...], ...]) -> list[str]:
    """The events a chain of the caller may call: not external ones, and within every allow list."""
    return [spec.name for spec in registry.specs() if spec.kind != "external"
            and all(any(fnmatch.fnmatchcase(spec.name, p) for p in patterns) for patterns in lists)]


def _parallel_problems(steps: Any, most: int) -> list[str]:
    """A model-written chain may not run more at once than its caller: a `max_parallel` above
    the caller's is refused (the sub-chain's default is the caller's already)."""
    found: list[str] = []
    stack = [steps]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            value = item.get("max_parallel")
            if isinstance(value, int) and not isinstance(value, bool) and value > most:
                found.append(f"max_parallel: {value} is more than the calling chain allows ({most})")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _document(steps: list[Any], allowed: list[str]) -> str:
    """The chain file around the model's steps: JSON is YAML, and its lines make the checker's
    line numbers useful to the model. Written by chainlang, not by the model."""
    return json.dumps({"chainlang": 1, "steps": steps, "allow": sorted(allowed)}, ensure_ascii=False, indent=1)


def last_result(sub: "ChainRun") -> Any:
    """The result of the chain's last top-level step (a group's: a list of its branches')."""
    if not sub.graph.nodes:
        return None
    node = sub.graph.nodes[-1]
    rec = sub.scope.find_path(node.path)
    if rec is not None:
        return rec.result
    children = getattr(node, "children", None) or ()
    found = [sub.scope.find_path(child.path) for child in children]
    return [r.result if r is not None else None for r in found] if found else None
