"""Scripted answers to `user.ask` (`chainlang run --answer ID=VALUE`, `emit --answer`).

A scripted answer is delivered through the project's store exactly as an answer a person
gives with `chainlang emit user.answered` (runtime/deliver.py): checked against the
question's choices or schema, settled in the store, then recorded as the wait's
`wait_finished` — so a resume replays it like any other answer. Its `by` is `--answer`.

The ids are checked before the run starts (a usage error, exit 2): each must name a
`user.ask` step of the chain (its `id`, or its path as the transcript shows it), and an
answer outside the literal `choices` of that step is refused there too. Choices made of
references are only known when the question is asked: an answer outside them fails that
step (type `params`) before it waits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.compile import ExecutionGraph, GraphNode
    from chainlang.runtime.wait_step import WaitRequest
    from chainlang.store import Store

__all__ = ["ANSWERED_BY", "ScriptedAnswers", "parse_answers"]

ANSWERED_BY = "--answer"  # the `by` of an answer given on the command line


def parse_answers(pairs: Sequence[str]) -> dict[str, Any]:
    """`--answer ID=VALUE`: VALUE is JSON when it parses as JSON, else the text itself."""
    from chainlang.runtime.emit import finite_float

    answers: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--answer {pair!r}: expected ID=VALUE, the id (or path) of a user.ask step and its "
                             "answer, e.g. --answer confirm=yes")
        if key in answers:
            raise UsageError(f"--answer {key} is given twice")
        try:
            answers[key] = json.loads(text, parse_float=finite_float)
        except ValueError:
            answers[key] = text
    return answers


@dataclass(frozen=True)
class _Ask:
    """A `user.ask` step of a chain, found for answers given in advance."""
    path: str
    id: str | None
    line: int
    choices: list[Any] | None  # None: none, or not known before it is asked (references)


def _asks(graphs: Iterable["ExecutionGraph | None"]) -> Iterator[_Ask]:
    def walk(nodes: Iterable["GraphNode"]) -> Iterator[_Ask]:
        for node in nodes:
            if node.kind == "wait" and node.wait is not None and node.wait.ask is not None:
                yield _Ask(node.path, node.id, node.line, _literal_choices(node.wait.ask.get("choices")))
            yield from walk(node.children)
            yield from walk(node.else_)

    for graph in graphs:
        if graph is not None:
            yield from walk(graph.nodes)


def reachable(graph: "ExecutionGraph", registry: Any, loader: Any) -> tuple[list["ExecutionGraph"], bool]:
    """The chains a run of `graph` may walk: itself and the named chains and `chain.run`
    files it calls (through them too), and whether it also runs a chain only written
    while it runs (agent.chain, a chain.run path made of references): its steps are
    unknown before then."""
    found: dict[int, "ExecutionGraph"] = {}
    written = False
    todo = [graph]
    while todo:
        current = todo.pop()
        if id(current) in found:
            continue
        found[id(current)] = current
        for node in _nodes(current.nodes):
            spec = registry.get(node.event) if node.event else None
            if spec is None or not (spec.kind == "chain" or spec.effects.get("runs_chains")):
                continue
            target = node.event if spec.kind == "chain" else _literal_path(node)
            if target is None:
                written = True
                continue
            try:
                todo.append(loader(target, current.file))
            except Exception:  # not loadable now: its run says why; its questions are unknown
                written = True
    return list(found.values()), written


def _nodes(nodes: Iterable["GraphNode"]) -> Iterator["GraphNode"]:
    for node in nodes:
        yield node
        yield from _nodes(node.children)
        yield from _nodes(node.else_)


def _literal_path(node: "GraphNode") -> str | None:
    """The path of a chain.run written out (None: agent.chain, or a path made of references)."""
    if node.event != "chain.run":
        return None
    value = node.params.get("path")
    if value is None or value.templates or not isinstance(value.data, str):
        return None
    return value.data


def _literal_choices(value: Any) -> list[Any] | None:
    """The choices of a user.ask when they are written out (no reference): else None."""
    if value is None or value.templates or not isinstance(value.data, list):
        return None  # none, or made of references: known when asked
    return list(value.data)


class ScriptedAnswers:
    """The answers of one run or emit, by the id (or path) of the user.ask steps they answer."""

    def __init__(self, answers: Mapping[str, Any]) -> None:
        self.answers = dict(answers)

    def __bool__(self) -> bool:
        return bool(self.answers)

    def check(self, graphs: Iterable["ExecutionGraph | None"], what: str, written: bool = False) -> None:
        """Refuse (UsageError) an answer naming no user.ask step of `graphs`, or outside the
        literal choices of the step it names. `what` says where the steps were looked for;
        `written`: the run also walks chains written while it runs (agent.chain), whose
        steps may be the ones named: an id not found is then taken on trust."""
        from chainlang.expr.values import json_equal

        asks = list(_asks(graphs))
        for key, value in self.answers.items():
            named = [ask for ask in asks if key in (ask.id, ask.path)]
            if not named and written:
                continue
            if not named:
                known = ", ".join(sorted({ask.id or ask.path for ask in asks}))
                raise UsageError(f"--answer {key}: no user.ask step with that id or path in {what}"
                                 + (f"; its user.ask steps: {known}" if known else " (it asks nothing)"))
            for ask in named:
                if ask.choices is not None and not any(json_equal(value, c) for c in ask.choices):
                    shown = ", ".join(json.dumps(c, ensure_ascii=False) for c in ask.choices)
                    raise UsageError(f"--answer {key}={json.dumps(value, ensure_ascii=False)}: not one of the choices "
                                     f"of the user.ask {ask.id or ask.path} (line {ask.line}): {shown}")

    def answer_for(self, request: "WaitRequest") -> tuple[str, Any] | None:
        """The (id, answer) scripted for this wait, if it is a user.ask that has one."""
        if request.question is None:
            return None
        for key in (request.step_id, request.step):
            if key is not None and key in self.answers:
                return key, self.answers[key]
        return None

    def _payload(self, request: "WaitRequest") -> tuple[str, dict[str, Any]] | None:
        scripted = self.answer_for(request)
        if scripted is None or request.question is None:
            return None
        key, value = scripted
        return key, {"question_id": request.question["id"], "answer": value, "by": ANSWERED_BY}

    def refuse_invalid(self, store: "Store", request: "WaitRequest") -> None:
        """Before the wait begins (registered, still waiting): an answer its question refuses
        (choices or schema, runtime/deliver.check_answer) cancels the wait and fails the step
        (StepFailed, type params), so nothing is left waiting for an answer that never comes."""
        from chainlang.runtime.deliver import check_answer
        from chainlang.runtime.outcomes import StepFailed, error_of
        from chainlang.status import PARAMS

        scripted = self._payload(request)
        if scripted is None:
            return
        key, payload = scripted
        problems = check_answer(store, payload)
        if problems:
            store.settle_wait(request.run_id, request.step, "cancelled")
            store.finish_wait(request.run_id, request.step)
            raise StepFailed(request.step, "user.ask", error_of(
                PARAMS, f"--answer {key}={json.dumps(payload['answer'], ensure_ascii=False)}: {problems[0]}"))

    def deliver(self, store: "Store", request: "WaitRequest") -> None:
        """Answer the question of `request` through the store, as `chainlang emit
        user.answered` would (the wait began: its wait_started is recorded)."""
        from chainlang.compile.wait_graph import ANSWER_EVENT
        from chainlang.runtime.deliver import deliver_event

        scripted = self._payload(request)
        if scripted is not None:  # its emit id says where it came from (no emit made it)
            deliver_event(store, ANSWER_EVENT, scripted[1], f"{ANSWERED_BY} {scripted[0]}")
