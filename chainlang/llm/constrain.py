"""The JSON Schemas sent with the agents' requests (LANGUAGE.md §13, "Answers are constrained,
not only validated"), and the compact views of events their prompts list.

An endpoint that enforces `response_format` (llama.cpp's grammar, vLLM, Ollama, OpenAI's
structured outputs) can then only produce answers of the right shape: for `agent.chain`, steps
whose event is one of the events the caller may call, each with its own params beside it; for
`agent.think`, one of the next events it may plan with. Validation stays (the answer is parsed
and the chain checked as before): constraining is how the model gets it right, validation is
how chainlang knows.

The schemas are plain draft-07 and kept small, because an endpoint turns them into a grammar:
descriptions, defaults and the keywords grammar converters do not take (`if`/`then`, `not`,
`pattern` of a tool, `format`, long length bounds) are left out, nesting is bounded, the events
listed are bounded and ordered by the words they share with the plan (the most relevant first:
a small model tends to take the first event listed), and a chain has at most as many steps as
the plan has, plus one. What a particular endpoint cannot take is simplified further where the
request is sent (`chainlang.llm.schema_fit`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["ANSWER_WORDS", "MAX_LISTED", "MAX_PARALLEL", "REFERENCE", "asks_for_answer", "chain_answer_schema",
           "from_answer", "plan_length", "plan_steps", "rank_events", "short_description", "signature",
           "think_answer_schema"]

MAX_LISTED = 24  # events an agent.chain request lists (the most relevant to its plan)
MAX_PARALLEL = 4  # steps of one parallel group of a model-written chain
MAX_DEPTH = 3  # nesting kept inside one param's schema; deeper values are any JSON
MAX_ENUM = 24  # longer enums are plain strings in the schema (and in signatures)
MAX_BOUND = 64  # minItems/maxItems kept; larger ones make large grammars
DESCRIPTION_CHARS = 100  # of an event's description in a prompt

# a param's value may be a reference to an earlier result instead: "{tools.now.date}"
REFERENCE: dict[str, Any] = {"type": "string", "pattern": "^\\{[^{}]+\\}$"}
_NO_PARAMS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")


# -- agent.chain ------------------------------------------------------------------------------


def chain_answer_schema(events: Sequence[tuple[str, dict[str, Any] | None]], max_steps: int,
                        max_parallel: int = MAX_PARALLEL) -> dict[str, Any]:
    """`{"chain": [STEP, ...]}` in the seed's step format: each STEP `{"event": NAME, "params":
    {...}}` for one of `events` (name, params schema) with that event's params, or a parallel
    group of such steps (no deeper nesting); at most `max_steps` steps."""
    steps = [_event_step(name, params) for name, params in events]
    one: dict[str, Any] = {"oneOf": steps} if len(steps) > 1 else (steps[0] if steps else {"not": {}})
    items: dict[str, Any] = {"$ref": "#/definitions/step"}
    if max_parallel >= 2 and steps:
        group = {"type": "array", "minItems": 2, "maxItems": max_parallel, "items": {"$ref": "#/definitions/step"}}
        items = {"anyOf": [{"$ref": "#/definitions/step"}, group]}
    return {
        "type": "object",
        "properties": {"chain": {"type": "array", "minItems": 1, "maxItems": max(1, max_steps), "items": items}},
        "required": ["chain"],
        "additionalProperties": False,
        "definitions": {"step": one},
    }


def _event_step(name: str, params: dict[str, Any] | None) -> dict[str, Any]:
    loose = _params(params)
    required = ["event", "params"] if loose.get("required") else ["event"]
    return {"type": "object", "properties": {"event": {"const": name}, "params": loose},
            "required": required, "additionalProperties": False}


def _params(schema: dict[str, Any] | None) -> dict[str, Any]:
    """An event's params schema for a model-written step: its properties trimmed (`_trim`),
    and each value allowed to be a reference instead (`REFERENCE`)."""
    if not isinstance(schema, dict):
        return {"type": "object"}
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        closed = schema.get("additionalProperties") is False and not schema.get("patternProperties")
        return dict(_NO_PARAMS) if closed else {"type": "object"}
    out: dict[str, Any] = {"type": "object",
                           "properties": {key: _referable(_trim(value, 1)) for key, value in properties.items()}}
    required = [key for key in schema.get("required", ()) if key in properties]
    if required:
        out["required"] = required
    out["additionalProperties"] = False  # a key the event does not take is the checker's error anyway
    return out


def _referable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema`, or a reference string: unchanged when it already takes any string."""
    if _takes_any_string(schema):
        return schema
    return {"anyOf": [schema, REFERENCE]}


def _takes_any_string(schema: dict[str, Any]) -> bool:
    if not schema:
        return True
    if "anyOf" in schema:
        return any(_takes_any_string(option) for option in schema["anyOf"])
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    return "string" in kinds and not ({"enum", "const", "pattern", "maxLength"} & set(schema))


def _trim(schema: Any, depth: int) -> dict[str, Any]:
    """`schema` with only what a grammar needs: types, enums, consts, properties and required
    keys, items, alternatives, small bounds. Deeper than MAX_DEPTH: any value."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return {}
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _TYPES:
        out["type"] = kind
    elif isinstance(kind, list):
        kinds = [k for k in kind if k in _TYPES]
        if kinds:
            out["type"] = kinds if len(kinds) > 1 else kinds[0]
    if "const" in schema:
        out["const"] = schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and 0 < len(enum) <= MAX_ENUM:
        out["enum"] = list(enum)
    for key in ("minimum", "maximum"):  # integer ranges only: llama.cpp takes those
        if out.get("type") == "integer" and isinstance(schema.get(key), int) and not isinstance(schema[key], bool):
            out[key] = schema[key]
    for key in ("minItems", "maxItems"):
        value = schema.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_BOUND:
            out[key] = value
    properties = schema.get("properties")
    if isinstance(properties, dict) and properties:
        out["properties"] = {key: _trim(value, depth + 1) for key, value in properties.items()}
        required = [key for key in schema.get("required", ()) if key in properties]
        if required:
            out["required"] = required
        if schema.get("additionalProperties") is False:
            out["additionalProperties"] = False
    if isinstance(schema.get("items"), dict):
        items = _trim(schema["items"], depth + 1)
        if items:
            out["items"] = items
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            trimmed = [_trim(option, depth) for option in options]
            if any(not option for option in trimmed):  # one alternative takes anything: so does the whole
                continue
            out["anyOf"] = trimmed  # the same for a grammar; a value matching two is not an error here
            if all("type" in option for option in trimmed):
                out.pop("type", None)  # each alternative says its own
    return out


def from_answer(steps: Iterable[Any]) -> list[Any]:
    """A model's steps in the chain file's own forms: `{"event": NAME, "params": {...}}` as
    `{NAME: {...}}`, and with no params as the bare `NAME`; inside a parallel group too. A step
    in any other form (`{NAME: {...}}`, a block, a step with an `id`) is kept as it is: the
    checker reads every form the language has."""
    out: list[Any] = []
    for step in steps:
        if isinstance(step, list):
            out.append(from_answer(step))
        elif isinstance(step, dict) and isinstance(step.get("event"), str) and set(step) <= {"event", "params"}:
            params = step.get("params")
            out.append(step["event"] if params is None or params == {} else {step["event"]: params})
        else:
            out.append(step)
    return out


# -- what a plan asks for ---------------------------------------------------------------------

_NUMBERED = re.compile(r"(?:^|\s)\d{1,2}[.)]\s")
_CLAUSE = re.compile(r"(?<=[.;!?])\s+|,?\s+\bthen\b\s+|\s*->\s*|\s*→\s*", re.IGNORECASE)
# the words of a plan's last step that ask for an answer to the user (`asks_for_answer`)
ANSWER_WORDS = frozenset({"answer", "reply", "respond", "tell", "summarize", "summarise", "summary", "present",
                          "report", "explain", "show"})


def plan_steps(plan: str) -> list[str]:
    """The steps of a plan: its numbered items, else its lines, else its sentences and "then"
    clauses (at least one: the plan itself)."""
    numbered = [part.strip() for part in _NUMBERED.split(plan)[1:] if part.strip()]
    if len(numbered) >= 2:
        return numbered
    lines = [line.strip() for line in plan.splitlines() if line.strip()]
    if len(lines) >= 2:
        return lines
    parts = [part.strip() for part in _CLAUSE.split(plan.strip()) if part and part.strip(" .;")]
    return parts or [plan]


def plan_length(plan: str) -> int:
    """How many steps a plan asks for (`plan_steps`)."""
    return len(plan_steps(plan))


def asks_for_answer(plan: str) -> bool:
    """Whether the plan's last step asks for an answer: it names agent.think or agent.reply,
    or says to answer, reply, respond, tell, summarize, present, report, explain or show
    (the closing step agent.think's prompt asks a plan to end with)."""
    last = plan_steps(plan)[-1].lower()
    return "agent.think" in last or "agent.reply" in last or bool(ANSWER_WORDS & set(_WORD.findall(last)))


_STOP = frozenset("""a an and any are as at be by do does each else for from get give has have if in into is it
its me my of on one or our so some than that the their them then there these this those to up us use using
was we what when which while who will with you your""".split())
_WORD = re.compile(r"[a-z0-9]+")
# a plan's words for the run's clock (tools.now), which its name and description do not say
_ALIASES = {"today": "now", "current": "now", "currently": "now", "time": "now", "clock": "now"}


def _words(text: str) -> set[str]:
    """The words of `text` that say something, lowercased, a plural's `s` dropped."""
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOP or len(word) < 2:
            continue
        out.add(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    return out


def rank_events(events: Sequence[tuple[str, str]], plan: str, limit: int = MAX_LISTED) -> list[str]:
    """The names of `events` (name, description), the most relevant to `plan` first, at most
    `limit`: for each step of the plan in turn, the event that fits it best (a small model
    tends to take the first event listed), then the others by how well they fit the whole
    plan, then by name. An event fits a text by the words they share, each weighed by how
    rare it is among the events (`calendar` says more than `user`), a word of its name
    twice; an event the text names outright fits best."""
    import math

    named = {name: _words(name.replace(".", " ").replace("_", " ")) for name, _ in events}
    described = {name: _words(description) - named[name] for name, description in events}
    counts: dict[str, int] = {}
    for name, _ in events:
        for word in named[name] | described[name]:
            counts[word] = counts.get(word, 0) + 1
    total = len(events)

    def fit(name: str, text: str) -> float:
        said = _words(text)
        said |= {_ALIASES[word] for word in said if word in _ALIASES}
        score = 0.0
        for word in said & (named[name] | described[name]):
            weight = math.log((total + 1) / (counts[word] + 0.5))
            score += 2 * weight if word in named[name] else weight
        if re.search(rf"(?<![\w.]){re.escape(name.lower())}(?!\w)", text.lower()):
            score += 100
        return score

    order: list[str] = []
    for step in plan_steps(plan):
        score, name = min(((-fit(name, step), name) for name, _ in events if name not in order), default=(0.0, ""))
        if score < 0:
            order.append(name)
    rest = sorted((-fit(name, plan), name) for name, _ in events if name not in order)
    order += [name for _, name in rest]
    return order[:limit]


# -- agent.think ------------------------------------------------------------------------------


def think_answer_schema(may_chain: bool) -> dict[str, Any]:
    """The next event agent.think may answer with: agent.reply (a message), and agent.chain
    (a plan) when the allow lists in force let it be called."""
    shapes = [_next("agent.reply", "message")] + ([_next("agent.chain", "plan")] if may_chain else [])
    return {"oneOf": shapes}


def _next(event: str, key: str) -> dict[str, Any]:
    return {"type": "object",
            "properties": {"event": {"const": event},
                           "params": {"type": "object", "properties": {key: {"type": "string"}},
                                      "required": [key], "additionalProperties": False}},
            "required": ["event", "params"], "additionalProperties": False}


# -- what prompts show of an event ------------------------------------------------------------


def short_description(text: str | None, limit: int = DESCRIPTION_CHARS) -> str:
    """An event's description for a prompt: one line, its first sentence, at most `limit`
    characters (cut at a word)."""
    line = " ".join((text or "").split())
    first = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    if len(first) <= limit:
        return first.rstrip(".")
    cut = first[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"


def signature(name: str, params: dict[str, Any] | None) -> str:
    """`calendar.check(date: string, query?: string)`: the params an event takes, required
    ones first, optional ones marked `?`, enums as `a|b|c`."""
    if not isinstance(params, dict):
        return f"{name}(...)"
    properties = params.get("properties")
    if not isinstance(properties, dict) or not properties:
        return f"{name}()" if params.get("additionalProperties") is False else f"{name}(...)"
    required = [key for key in params.get("required", ()) if key in properties]
    ordered = required + [key for key in properties if key not in required]
    parts = [f"{key}{'' if key in required else '?'}: {_kind(properties[key])}" for key in ordered]
    return f"{name}({', '.join(parts)})"


def _kind(schema: Any, depth: int = 0) -> str:
    """A param's type as a signature shows it: string, integer, a|b, string[], string|object..."""
    if not isinstance(schema, dict) or depth > 2:
        return "any"
    enum = schema.get("enum")
    if isinstance(enum, list) and 0 < len(enum) <= 6 and all(isinstance(v, str) for v in enum):
        return "|".join(enum)
    if "const" in schema:
        return repr(schema["const"]) if not isinstance(schema["const"], str) else schema["const"]
    kind = schema.get("type")
    if isinstance(kind, str) and kind != "array":
        return kind
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        kinds = list(dict.fromkeys(_kind(option, depth + 1) for option in options))
        return "|".join(kinds)
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        items = schema.get("items")
        inner = _kind(items, depth + 1) if isinstance(items, dict) and items else "any"
        return f"{inner}[]" if "|" not in inner else f"({inner})[]"
    if isinstance(kind, str):
        return kind
    if isinstance(schema.get("properties"), dict):
        return "object"
    return "any"
