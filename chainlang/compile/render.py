"""`chainlang graph`: an execution graph as Mermaid, Graphviz DOT or JSON.

Steps are nodes; edges follow the order of execution: a parallel group fans
out to its branches and joins after them, an if block is a decision node with
`then` and `else` edges, a wait (or user.ask) a node of its own shape saying
what it waits for and how long. The chain's hooks (its `hooks:`, and the
actions its steps register or schedule) are drawn beside the flow, in firing
order, with dashed edges: a `pre:` hook into each step of its event, a
`post:` or `error:` hook out of it, an event no step of the chain has (an
external one) as a node of its own, a registered action from its step. Output
is deterministic (ids come from step paths and firing order).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from chainlang.compile import ExecutionGraph, GraphNode
from chainlang.compile.hook_summary import HookSummary


@dataclass
class _Flow:
    """The nodes and edges of a drawing, collected before they are written as mermaid or dot."""
    nodes: list[tuple[str, str, str]] = field(default_factory=list)  # id, label, shape
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # from, to, label
    events: list[tuple[str, str]] = field(default_factory=list)  # event name, id of a step node calling it
    hook_edges: list[tuple[str, str, str]] = field(default_factory=list)  # dashed: from, to, label


def _node_id(path: str) -> str:
    return "s" + path.replace(".", "_").replace(":", "_").replace("-", "_")


def _label(node: GraphNode) -> str:
    if node.kind == "event":
        text = node.event or "?"
    elif node.kind == "if":
        text = f"if {node.condition_text}"
    elif node.kind == "repeat":  # compile/loops.py
        plan = node.repeat
        text = f"repeat until {plan.until_text} (max {plan.max})" if plan.until_text else f"repeat {plan.max} times"
    elif node.kind == "wait":  # compile/wait_graph.py
        text = _wait_label(node)
    else:
        text = node.kind
    if node.id:
        text = f"{node.id}: {text}"
    extras = []
    if node.kind != "if" and node.condition_text:
        extras.append(f"if {node.condition_text}")
    if node.foreach_text:
        extras.append(f"foreach {node.as_} in {node.foreach_text}")
    if node.retry is not None:
        extras.append(f"retry x{node.retry.attempts}")
    if node.on_error != "fail":
        extras.append(f"on_error {node.on_error}")
    return "\n".join([text] + extras)


def _flow(graph: ExecutionGraph) -> _Flow:
    flow = _Flow()
    if not graph.nodes and graph.hook_summaries:  # a hooks file: its hooks alone
        _hooks(graph.hook_summaries, flow)
        return flow
    # ids "begin"/"finish": `end` is a reserved word in Mermaid flowcharts
    flow.nodes.append(("begin", "start", "round"))
    exits = _sequence(graph.nodes, ["begin"], flow, "")
    flow.nodes.append(("finish", "end", "round"))
    for e in exits:
        flow.edges.append((e, "finish", ""))
    _hooks(graph.hook_summaries, flow)
    return flow


_PHASE_LABELS = {"pre": "pre", "post": "post", "error": "on error"}


def _hooks(hooks: tuple[HookSummary, ...], flow: _Flow) -> None:
    """The hooks beside the flow (see the module docstring)."""
    outside: dict[str, str] = {}  # an event no step calls -> its node
    for index, hook in enumerate(hooks):
        hid = f"hook{index + 1}"
        flow.nodes.append((hid, _hook_label(hook), "hook"))
        if hook.origin is not None:
            flow.hook_edges.append((_node_id(hook.origin), hid, "registers" if hook.kind == "registered" else "schedules"))
        if hook.phase is None or hook.pattern is None:
            continue
        steps = [nid for event, nid in flow.events if fnmatchcase(event, hook.pattern)]
        if not steps:
            if hook.pattern not in outside:
                outside[hook.pattern] = f"event{len(outside) + 1}"
                flow.nodes.append((outside[hook.pattern], hook.pattern, "event"))
            steps = [outside[hook.pattern]]
        label = _PHASE_LABELS.get(hook.phase, hook.phase)
        for nid in steps:
            flow.hook_edges.append((hid, nid, label) if hook.phase == "pre" else (nid, hid, label))


def _hook_label(hook: HookSummary) -> str:
    if hook.kind == "scheduled":
        lines = [f"scheduled by step {hook.origin}"]
    else:
        lines = [f"hook {hook.label}"]
        if hook.phase is not None:
            lines.append(f"{hook.phase}:{hook.pattern}")
    if hook.condition:
        lines.append(f"if {_short(hook.condition, 60)}")
    lines.extend(_short(does, 60) for does in hook.does)
    return "\n".join(lines)


def _sequence(nodes: tuple[GraphNode, ...], entries: list[str], flow: _Flow, label: str) -> list[str]:
    current = entries
    for i, node in enumerate(nodes):
        current = _step(node, current, flow, label if i == 0 else "")
    return current


def _step(node: GraphNode, entries: list[str], flow: _Flow, label: str) -> list[str]:
    nid = _node_id(node.path)
    if node.kind == "event":
        flow.nodes.append((nid, _label(node), "box"))
        flow.events.append((node.event or "", nid))
        for e in entries:
            flow.edges.append((e, nid, label))
        return [nid]
    if node.kind == "if":
        flow.nodes.append((nid, _label(node), "diamond"))
        for e in entries:
            flow.edges.append((e, nid, label))
        exits = _sequence(node.children, [nid], flow, "then")
        if node.else_:
            exits = exits + _sequence(node.else_, [nid], flow, "else")
        else:
            exits = exits + [nid]
        return exits
    if node.kind == "wait":  # a step of its own: the run stops here until the event (or the timeout)
        flow.nodes.append((nid, _label(node), "wait"))
        for e in entries:
            flow.edges.append((e, nid, label))
        plan = node.wait
        if plan is not None and plan.timeout is not None and plan.on_timeout == "break":
            flow.edges.append((nid, "finish", "timed out"))  # on_timeout: break ends the chain cleanly
        return [nid]
    if node.kind == "fail":  # compile/flow_graph.py: the chain ends here (unless its `if` is false)
        flow.nodes.append((nid, _label(node), "box"))
        for e in entries:
            flow.edges.append((e, nid, label))
        return [nid] if node.condition_text else []
    # a block: fork and join nodes keep parallel structure readable
    fork, join = nid, nid + "_join"
    flow.nodes.append((fork, _label(node), "fork"))
    for e in entries:
        flow.edges.append((e, fork, label))
    if node.kind == "parallel":
        exits = []
        for child in node.children:
            exits.extend(_step(child, [fork], flow, ""))
    elif node.kind in ("try", "switch"):
        exits = _branches(node, fork, flow)
    else:
        exits = _sequence(node.children, [fork], flow, "")
    if not exits:  # every way through ends the chain (a `fail`): nothing joins
        return []
    flow.nodes.append((join, "end " + node.kind, "join"))
    for e in exits:
        flow.edges.append((e, join, ""))
    if node.kind == "repeat":  # the next pass starts again at the top of the body
        flow.edges.append((join, fork, "next pass"))
    return [join]


def _wait_label(node: GraphNode) -> str:
    """`wait approval.given (2d)` with its where and on_timeout below; `user.ask "question" (1d)`."""
    plan = node.wait
    if plan is None:
        return "wait"
    if plan.ask is not None:
        question = plan.ask.get("question")
        timeout = plan.ask.get("timeout")
        text = f"{node.event} " + (_quoted(question.data) if question is not None and isinstance(question.data, str)
                                   else "?")
        if timeout is not None and isinstance(timeout.data, str):
            text += f" ({timeout.data})"
        return text
    lines = [f"wait {plan.event}" + (f" ({_duration_text(plan.timeout)})" if plan.timeout is not None else "")]
    if plan.where:
        lines.append(f"where {_short(plan.where, 60)}")
    if plan.timeout is not None and plan.on_timeout != "fail":
        lines.append(f"on_timeout {plan.on_timeout}")
    return "\n".join(lines)


def _quoted(text: str) -> str:
    return "'" + _short(text, 40) + "'"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_UNITS = (("w", 7 * 86400.0), ("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0))


def _duration_text(seconds: float) -> str:
    """A duration as written in chains (172800 → 2d, 5400 → 1h30m, 0.5 → 500ms)."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    parts, left = [], seconds
    for unit, size in _UNITS:
        count = int(left // size)
        if count:
            parts.append(f"{count}{unit}")
            left -= count * size
    if left >= 0.001:
        parts.append(f"{round(left * 1000)}ms")
    return "".join(parts)


def _branches(node: GraphNode, fork: str, flow: _Flow) -> list[str]:
    """The branches of a try (catch taken on a failure, finally after either) or of a
    switch (one edge per case, labelled by its key), as alternatives from the fork."""
    labels = node.flow.labels if node.flow is not None else ()
    branches = list(zip(labels, node.children))
    if node.kind == "switch":
        exits: list[str] = []
        for key, child in branches:
            exits.extend(_step(child, [fork], flow, "default" if key is None else f"= {key}"))
        if None not in labels:
            exits.append(fork)  # no case matched: the block is skipped
        return exits
    parts = dict(branches)
    exits = _step(parts["try"], [fork], flow, "") if "try" in parts else [fork]
    if "catch" in parts:
        exits = exits + _step(parts["catch"], [fork], flow, "on failure")
    if "finally" in parts:
        exits = _step(parts["finally"], exits, flow, "always")
    return exits


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("\n", "<br/>")


def to_mermaid(graph: ExecutionGraph) -> str:
    flow = _flow(graph)
    shapes = {"round": ("([", "])"), "box": ("[", "]"), "diamond": ("{", "}"), "fork": ("[[", "]]"), "join": ("((", "))"),
              "wait": ("{{", "}}"), "hook": ("[/", "/]"), "event": (">", "]")}
    lines = ["flowchart TD"]
    for nid, label, shape in flow.nodes:
        left, right = shapes[shape]
        lines.append(f'    {nid}{left}"{_mermaid_text(label)}"{right}')
    for a, b, label in flow.edges:
        lines.append(f"    {a} -->|{label}| {b}" if label else f"    {a} --> {b}")
    for a, b, label in flow.hook_edges:
        lines.append(f"    {a} -.->|{label}| {b}")
    return "\n".join(lines)


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_dot(graph: ExecutionGraph) -> str:
    flow = _flow(graph)
    shapes = {"round": "oval", "box": "box", "diamond": "diamond", "fork": "box3d", "join": "point", "wait": "hexagon",
              "hook": "parallelogram", "event": "cds"}
    lines = ["digraph chain {", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    for nid, label, shape in flow.nodes:
        lines.append(f'  {nid} [label="{_dot_text(label)}", shape={shapes[shape]}];')
    for a, b, label in flow.edges:
        lines.append(f'  {a} -> {b} [label="{_dot_text(label)}"];' if label else f"  {a} -> {b};")
    for a, b, label in flow.hook_edges:
        lines.append(f'  {a} -> {b} [label="{_dot_text(label)}", style=dashed];')
    lines.append("}")
    return "\n".join(lines)


def _node_json(node: GraphNode) -> dict[str, Any]:
    out: dict[str, Any] = {"path": node.path, "kind": node.kind, "line": node.line}
    for key, value in (("event", node.event), ("id", node.id), ("if", node.condition_text),
                       ("foreach", node.foreach_text), ("max_parallel", node.max_parallel),
                       ("timeout", node.timeout), ("decide", node.decide)):
        if value is not None:
            out[key] = value
    if node.foreach_text:
        out["as"] = node.as_
    if node.on_error != "fail":
        out["on_error"] = node.on_error
    if node.retry is not None:
        r = node.retry
        out["retry"] = {"attempts": r.attempts, "delay": r.delay, "backoff": r.backoff, "max_delay": r.max_delay}
        if r.on is not None:
            out["retry"]["on"] = list(r.on)
        if r.jitter:
            out["retry"]["jitter"] = True
    if node.kind == "wait" and node.wait is not None:  # what it waits for (user.ask: user.answered, its question)
        plan = node.wait
        out["wait"] = {"event": plan.event, "where": plan.where, "timeout": plan.timeout, "on_timeout": plan.on_timeout}
        if plan.ask is not None:
            out["wait"]["ask"] = {name: value.data for name, value in plan.ask.items()}
    if node.params:
        out["params"] = {name: {"value": value.data, "templates": len(value.templates)} for name, value in node.params.items()}
    if node.children:
        out["then" if node.kind == "if" else "steps"] = [_node_json(c) for c in node.children]
    if node.else_:
        out["else"] = [_node_json(c) for c in node.else_]
    return out


def to_json(graph: ExecutionGraph) -> str:
    flow = _flow(graph)
    data = {
        "file": graph.file,
        "chain": graph.name,
        "limits": {"max_steps": graph.max_steps, "max_depth": graph.max_depth, "timeout": graph.timeout,
                   "max_parallel": graph.max_parallel, "max_model_calls": graph.max_model_calls,
                   "max_tokens": graph.max_tokens},
        "allow": list(graph.allow) if graph.allow is not None else None,
        "hooks": list(graph.hooks),
        "steps": [_node_json(n) for n in graph.nodes],
        "outputs": sorted(graph.outputs),
        "edges": [{"from": a, "to": b, "label": label} for a, b, label in flow.edges],
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


RENDERERS = {"mermaid": to_mermaid, "dot": to_dot, "json": to_json}
