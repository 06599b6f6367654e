"""Node tree → typed model. Structural problems become diagnostics; nothing raises.

This stage owns: unknown keys, wrong YAML types, the unquoted-template pitfall,
event-name form, ids, durations, limits, retry, and parsing every expression
and template (syntax errors at the column of the offending token).
"""

from __future__ import annotations

import re
from typing import Any

from chainlang.diagnostics import rules
from chainlang.diagnostics import DiagnosticSink, Rule
from chainlang.durations import DURATION_HINT, MAX_DURATION, MAX_DURATION_TEXT, parse_duration
from chainlang.expr import ExprSyntaxError, parse_expression, parse_template
from chainlang.load.loader import AnyNode, MapNode, ScalarNode, SeqNode
from chainlang.model.build_retry import read_retry_options
from chainlang.model.build_flow import FLOW_FORMS, FLOW_KEYS, build_flow, orphan_form
from chainlang.model.build_loops import REPEAT_KEYS, build_repeat
from chainlang.model.build_wait import WAIT_KEYS, build_wait
from chainlang.model.build_triggers import build_triggers
from chainlang.model.reply_outputs import reply_outputs
from chainlang.model.nodes import (
    BlockStep,
    Chain,
    Condition,
    EventDecl,
    EventStep,
    Hook,
    IfStep,
    Input,
    Limits,
    Retry,
    Step,
    StepBase,
    TemplateValue,
    Trigger,
    Value,
)
from chainlang.load.scalar_offsets import source_offset
from chainlang.diagnostics.suggest import closest
from chainlang.load.source import SourceFile, Span

EVENT_NAME = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$")
IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
EVENT_GLOB = re.compile(r"^[a-z0-9_*?\[\]!-]+(?:\.[a-z0-9_*?\[\]!-]+)*$")

# Names a step id may not take: roots of references and words of the expression language.
RESERVED_NAMES = frozenset(
    "inputs item run thread secrets event result status error params duration_ms loop "
    "true false null and or not in contains matches startswith endswith".split()
)

TOP_KEYS = ("chainlang", "chain", "description", "inputs", "steps", "hooks", "outputs", "limits", "allow", "events",
            "triggers")
HOOKS_FILE_KEYS = ("chainlang", "description", "events", "hooks")
COMMON_KEYS = ("id", "if", "foreach", "as", "max_parallel", "timeout", "on_error", "description")
EVENT_KEYS = COMMON_KEYS + ("event", "params", "decide", "retry", "expose")
PARALLEL_KEYS = COMMON_KEYS + ("parallel",)
STEPS_KEYS = COMMON_KEYS + ("steps",)
IF_KEYS = COMMON_KEYS + ("then", "else")
ALL_STEP_KEYS = frozenset(EVENT_KEYS + PARALLEL_KEYS + STEPS_KEYS + IF_KEYS + FLOW_KEYS + REPEAT_KEYS + WAIT_KEYS)
HOOK_KEYS = ("id", "trigger", "condition", "priority", "after", "action", "cancel", "set", "mode", "max", "max_depth",
             "on_error", "description")
LIMIT_KEYS = ("max_steps", "max_depth", "timeout", "max_parallel", "max_model_calls", "max_tokens")
RETRY_KEYS = ("attempts", "delay", "backoff", "max_delay", "on", "jitter")
EVENT_DECL_KEYS = ("description", "payload")
ON_ERROR = ("fail", "continue", "break")
HOOK_MODES = ("parallel", "queued", "single", "restart")

# Bounds for numbers written in chains (limits and retry).
LIMIT_RANGES = {"max_steps": (1, 1_000_000), "max_depth": (1, 64), "max_parallel": (1, 1024),
                "max_model_calls": (1, 1_000_000), "max_tokens": (1, 100_000_000)}
MAX_ATTEMPTS = 100


def node_span(node: AnyNode) -> Span:
    return node.span


def key_span(node: ScalarNode) -> Span:
    return Span(node.line, node.column, node.end_line, node.end_column)


def looks_like_template_map(node: AnyNode) -> bool:
    """`{tools.now.result}` unquoted: YAML reads a flow mapping with one key and a null value
    (and no `:` after the key: `{due: }` is a mapping written on purpose)."""
    if not (isinstance(node, MapNode) and node.flow and len(node.pairs) == 1):
        return False
    key, value = node.pairs[0]
    return (
        isinstance(value, ScalarNode)
        and value.value is None
        and value.end <= value.start
        and not value.text
        and value.start <= key.end + 1  # no `: ` between the key and the closing brace
    )


class ModelBuilder:
    def __init__(self, source: SourceFile, sink: DiagnosticSink) -> None:
        self.source = source
        self.sink = sink
        self._invalid = False  # set while building a value that holds a node the loader rejected

    # -- reporting helpers --

    def error(self, rule: Rule, message: str, node: AnyNode | Span, hint: str | None = None) -> None:
        span = node if isinstance(node, Span) else node_span(node)
        self.sink.add(rule, message, span, hint)

    def key_error(self, mapping: MapNode, key: str, rule: Rule, message: str, hint: str | None = None) -> None:
        key_node = mapping.key_node(key)
        self.error(rule, message, key_span(key_node) if key_node else node_span(mapping), hint)

    def wrong_type(self, node: AnyNode, what: str, expected: str, hint: str | None = None) -> None:
        if node.invalid:  # already reported by the loader
            return
        if looks_like_template_map(node):
            self.unquoted_template(node)  # type: ignore[arg-type]
            return
        self.error(rules.WRONG_TYPE, f"{what} must be {expected}, not {_kind_phrase(node)}", node, hint)

    def unquoted_template(self, node: MapNode) -> None:
        inner = self.source.text[node.start : node.end]
        self.error(
            rules.UNQUOTED_TEMPLATE,
            f"unquoted template: YAML reads {inner} as a mapping, not a template",
            node,
            hint=f'quote it: "{inner}"',
        )

    def check_keys(self, mapping: MapNode, allowed: tuple[str, ...] | frozenset[str], where: str) -> None:
        for key_node, _ in mapping.pairs:
            if key_node.text not in allowed:
                self.unknown_key(key_node, allowed, where)

    def unknown_key(self, key_node: ScalarNode, allowed: Any, where: str) -> None:
        guess = closest(key_node.text, allowed)
        hint = f"did you mean '{guess}'?" if guess else f"allowed keys: {', '.join(sorted(allowed))}"
        if "\ufeff" in key_node.text:
            hint = "the file has a byte-order mark (U+FEFF) in the middle of it: remove it"
        self.error(rules.UNKNOWN_KEY, f"unknown key '{key_node.text}' in {where}", key_span(key_node), hint)

    # -- scalars --

    def string(self, node: AnyNode | None, what: str) -> str | None:
        if node is None or node.invalid:  # absent, or already reported by the loader
            return None
        if isinstance(node, ScalarNode) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ScalarNode) and node.value is not None and not isinstance(node.value, bool):
            return node.text  # a number written where text is expected is still text
        self.wrong_type(node, what, "a string")
        return None

    def integer(self, node: AnyNode | None, what: str, rule: Rule, low: int, high: int) -> int | None:
        if node is None or node.invalid:  # absent, or already reported by the loader
            return None
        value = node.value if isinstance(node, ScalarNode) else None
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(rule, f"{what} must be a whole number from {low:,} to {high:,}, not {_kind_phrase(node)}", node)
            return None
        if not low <= value <= high:
            self.error(rule, f"{what} must be from {low:,} to {high:,}; got {value:,}", node)
            return None
        return value

    def boolean(self, node: AnyNode | None, what: str) -> bool | None:
        if node is None or node.invalid:  # absent, or already reported by the loader
            return None
        if isinstance(node, ScalarNode) and isinstance(node.value, bool):
            return node.value
        hint = "YAML 1.2 booleans are true and false only" if isinstance(node, ScalarNode) and node.text in ("yes", "no", "on", "off") else None
        self.wrong_type(node, what, "true or false", hint)
        return None

    def duration(self, node: AnyNode | None, what: str) -> float | None:
        if node is None or node.invalid:  # absent, or already reported by the loader
            return None
        if isinstance(node, ScalarNode) and isinstance(node.value, str):
            seconds = parse_duration(node.value)
            if seconds is None:
                self.error(rules.BAD_DURATION, f"{what}: '{node.value}' is not a duration", node, DURATION_HINT)
                return None
            if seconds <= 0 or seconds > MAX_DURATION:
                self.error(rules.BAD_DURATION, f"{what}: '{node.value}' is out of range (more than 0, at most {MAX_DURATION_TEXT})", node,
                           "a longer wait belongs to a scheduled task (task.schedule)" if seconds > 0 else None)
                return None
            return seconds
        if isinstance(node, ScalarNode) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            self.error(rules.BAD_DURATION, f"{what}: a bare number has no unit", node, f"write {node.text}s for seconds or {node.text}ms for milliseconds")
            return None
        self.error(rules.BAD_DURATION, f"{what} must be a duration such as 30s, not {_kind_phrase(node)}", node, DURATION_HINT)
        return None

    # -- expressions and templates --

    def expr_error(self, node: ScalarNode, err: ExprSyntaxError, base: int = 0) -> None:
        start = source_offset(self.source.text, node, base + err.offset)
        line, column = self.source.position(start)
        self.sink.add(rules.EXPR_SYNTAX, err.message, Span.point(line, column), err.hint)

    def condition(self, node: AnyNode | None, what: str) -> Condition | None:
        if node is None or node.invalid:  # absent, or already reported by the loader
            return None
        if not isinstance(node, ScalarNode):
            self.wrong_type(node, what, "an expression (a string)")
            return None
        try:
            expr = parse_expression(node.text)
        except ExprSyntaxError as err:
            self.expr_error(node, err)
            return Condition(node, None)
        return Condition(node, expr)

    def literal_list(self, node: SeqNode) -> Condition | None:
        """`foreach: [a, b]` written as a YAML/JSON list: the items, as a literal."""
        from chainlang.expr.ast import ListLit, Literal

        value = self.value(node)
        if value.templates:
            self.error(rules.WRONG_TYPE, "a foreach list written out cannot hold templates", value.templates[0].node,
                       "write the list as one expression instead, e.g. foreach: \"[a.result, b.result]\"")
            return Condition(node, None)
        items = tuple(Literal(item) for item in value.data)
        return Condition(node, ListLit(items))

    def value(self, node: AnyNode | None, path: tuple[str | int, ...] = ()) -> Value:
        """Plain data of a value, with every template string parsed once."""
        templates: list[TemplateValue] = []
        reported = len(self.sink.items)
        self._invalid = False
        data = self._value_data(node, path, templates)
        return Value(node, data, templates, broken=self._invalid or len(self.sink.items) > reported)

    def _value_data(self, node: AnyNode | None, path: tuple[str | int, ...], out: list[TemplateValue]) -> Any:
        if node is None:
            return None
        if node.invalid:
            self._invalid = True
        if isinstance(node, ScalarNode):
            value = node.value
            if isinstance(value, str) and ("{" in value or "}" in value):
                try:
                    template = parse_template(value)
                except ExprSyntaxError as err:
                    self.expr_error(node, err)
                    return value
                if template.is_literal:
                    return "".join(part for part in template.parts if isinstance(part, str))
                out.append(TemplateValue(node, template, path))
            return value
        if isinstance(node, SeqNode):
            return [self._value_data(item, path + (i,), out) for i, item in enumerate(node.items)]
        if looks_like_template_map(node):
            self.unquoted_template(node)
            return None
        return {k.text: self._value_data(v, path + (k.text,), out) for k, v in node.pairs}

    def mapping_of_values(self, node: AnyNode | None, what: str) -> tuple[dict[str, Value], dict[str, ScalarNode]]:
        if node is None:
            return {}, {}
        if not isinstance(node, MapNode) or looks_like_template_map(node):
            self.wrong_type(node, what, "a mapping")
            return {}, {}
        values: dict[str, Value] = {}
        keys: dict[str, ScalarNode] = {}
        for key_node, value_node in node.pairs:
            values[key_node.text] = self.value(value_node, (key_node.text,))
            keys[key_node.text] = key_node
        return values, keys

    # -- steps --

    def steps(self, node: AnyNode | None, prefix: str, what: str = "steps") -> list[Step]:
        if node is None:
            return []
        if not isinstance(node, SeqNode):
            self.wrong_type(node, what, "a list of steps")
            return []
        return [self.step(item, f"{prefix}{i + 1}") for i, item in enumerate(node.items)]

    def step(self, node: AnyNode, path: str, in_parallel: bool = False) -> Step:
        if isinstance(node, ScalarNode):
            return self.bare_step(node, path)
        if isinstance(node, SeqNode):
            if in_parallel:
                self.error(
                    rules.WRONG_TYPE,
                    "a list inside a parallel group is ambiguous",
                    node,
                    "use `steps: [...]` for a sequential branch, or list the steps as more parallel branches",
                )
            return self.parallel_list(node, path)
        if looks_like_template_map(node):
            self.unquoted_template(node)
            return EventStep(path=path, node=node)
        return self.mapping_step(node, path)

    def bare_step(self, node: ScalarNode, path: str) -> EventStep:
        step = EventStep(path=path, node=node)
        if not isinstance(node.value, str):
            self.wrong_type(node, "a step", "an event name, a mapping or a list")
            return step
        if self.event_name(node, node.value):
            step.event, step.event_node = node.value, node
        return step

    def event_name(self, node: ScalarNode, name: str) -> bool:
        if EVENT_NAME.match(name):
            return True
        if "." not in name and name in ALL_STEP_KEYS:
            self.error(rules.EVENT_NAME, f"'{name}' is a step keyword, not an event", node, f"write '{name}:' as a key of a step mapping")
            return False
        lowered = name.strip().lower()
        guesses = [lowered.replace("-", "_").replace(" ", "_"), lowered.replace("-", ".").replace(" ", ".").replace("/", ".")]
        if "." not in name:
            guesses.append(lowered.replace("_", ".", 1))
        fixed = next((g for g in guesses if EVENT_NAME.match(g)), None)
        hint = f"did you mean '{fixed}'?" if fixed else "event names are dotted lowercase words, like tools.now (words without a dot are reserved keywords)"
        what = "an event name: events are dotted, namespace.action" if "." not in name else "a valid event name"
        self.error(rules.EVENT_NAME, f"'{name}' is not {what}", node, hint)
        return False

    def parallel_list(self, node: SeqNode, path: str) -> BlockStep:
        block = BlockStep(path=path, node=node, parallel=True)
        if not node.items:
            self.error(rules.WRONG_TYPE, "an empty parallel group runs nothing", node, "remove it or add steps")
        block.steps = [self.step(item, f"{path}.{i + 1}", in_parallel=True) for i, item in enumerate(node.items)]
        return block

    def mapping_step(self, node: MapNode, path: str) -> Step:
        has = node.index.__contains__
        forms = [k for k in ("event", "parallel", "steps", "then", "repeat", "wait") + FLOW_FORMS if has(k)]
        if not forms and (meant := orphan_form(self, node)) is not None:  # catch: without try: (model/build_flow.py)
            forms = [meant]
        if has("else") and not has("then"):
            self.key_error(node, "else", rules.WRONG_TYPE, "'else' without 'then'", "an if block needs if:, then: and optionally else:")
            if not forms:
                forms = ["then"]  # read it as the if block it was meant to be
        if len(forms) > 1:
            self.key_error(node, forms[1], rules.WRONG_TYPE, f"a step cannot be both '{forms[0]}' and '{forms[1]}'",
                           "split it into two steps")
        form = forms[0] if forms else None
        conflicting = set(forms[1:]) | ({"else"} if len(forms) > 1 and forms[0] != "then" else set())
        if form == "event":
            step: Step = self.canonical_event(node, path, node.get("event"))
            allowed: tuple[str, ...] = EVENT_KEYS
        elif form == "parallel":
            block = BlockStep(path=path, node=node, parallel=True)
            inner = node.get("parallel")
            if isinstance(inner, SeqNode):
                if not inner.items:
                    self.error(rules.WRONG_TYPE, "an empty parallel group runs nothing", inner)
                block.steps = [self.step(item, f"{path}.{i + 1}", in_parallel=True) for i, item in enumerate(inner.items)]
            elif inner is not None:
                self.wrong_type(inner, "'parallel'", "a list of steps")
            step, allowed = block, PARALLEL_KEYS
        elif form == "steps":
            block = BlockStep(path=path, node=node, parallel=False)
            block.steps = self.steps(node.get("steps"), f"{path}.", "'steps'")
            step, allowed = block, STEPS_KEYS
        elif form == "repeat":  # model/build_loops.py
            step, allowed = build_repeat(self, node, path)
        elif form in FLOW_FORMS:  # try, switch, fail (model/build_flow.py)
            step, allowed = build_flow(self, node, path, form)
        elif form == "wait":  # model/build_wait.py
            step, allowed = build_wait(self, node, path)
        elif form == "then":
            cond_step = IfStep(path=path, node=node)
            if not has("if"):
                self.key_error(node, "then", rules.WRONG_TYPE, "'then' without 'if'", "add if: <condition>")
            cond_step.condition = self.condition(node.get("if"), "'if'")
            cond_step.then = self.steps(node.get("then"), f"{path}.then.", "'then'")
            cond_step.else_ = self.steps(node.get("else"), f"{path}.else.", "'else'")
            step, allowed = cond_step, IF_KEYS
        else:
            step = self.compact_event(node, path)
            # the event key and any extra names were judged by compact_event
            extra = {k.text for k, _ in node.pairs if k.text not in ALL_STEP_KEYS}
            for key_node, _ in node.pairs:
                if key_node.text not in EVENT_KEYS and key_node.text not in extra:
                    self.unknown_key(key_node, tuple(k for k in EVENT_KEYS if k not in ("event", "params")), "a step")
            allowed = ()
        if allowed:
            self.check_keys(node, tuple(allowed) + tuple(conflicting), "a step")
        self.common(step, node, skip_if=isinstance(step, IfStep))
        return step

    def compact_event(self, node: MapNode, path: str) -> EventStep:
        names = [k for k, _ in node.pairs if k.text not in ALL_STEP_KEYS]
        step = EventStep(path=path, node=node)
        if not names:
            self.error(rules.WRONG_TYPE, "this step names no event", node,
                       "add an event (event: tools.now, or the compact form tools.now: {params})")
            return step
        if len(names) > 1:
            for extra in names[1:]:
                if EVENT_NAME.match(extra.text) and EVENT_NAME.match(names[0].text):
                    self.error(rules.WRONG_TYPE, f"one step names two events ('{names[0].text}' and '{extra.text}')",
                               key_span(extra), "put each event in its own list item ('- ')")
                else:
                    self.unknown_key(extra, EVENT_KEYS, "a step")
        key = names[0]
        if "params" in node.index:
            self.key_error(node, "params", rules.WRONG_TYPE, "the compact form takes its params as the value of the event key",
                           f"move these params under '{key.text}:'")
        if not self.event_name(key, key.text):
            return step
        step.event, step.event_node = key.text, key
        self.params(step, node.get(key.text))
        self.event_options(step, node)
        return step

    def canonical_event(self, node: MapNode, path: str, event_node: AnyNode | None) -> EventStep:
        step = EventStep(path=path, node=node)
        name = self.string(event_node, "'event'") if event_node is not None else None
        if name is not None and isinstance(event_node, ScalarNode) and self.event_name(event_node, name):
            step.event, step.event_node = name, event_node
        self.params(step, node.get("params"))
        self.event_options(step, node)
        return step

    def event_options(self, step: EventStep, node: MapNode) -> None:
        """`decide` and `retry`, the same in the canonical and the compact form."""
        decide = node.get("decide")
        if decide is not None:
            step.decide = self.string(decide, "'decide'")
            step.decide_node = decide if isinstance(decide, ScalarNode) else None
        if node.key_node("retry") is not None:
            step.retry = self.retry(node.get("retry"), node)
        if node.key_node("expose") is not None:  # §16: the secrets this step may send to a model or user.notify
            from chainlang.model.build_expose import read_expose

            read_expose(self, step, node.get("expose"))

    def params(self, step: EventStep, node: AnyNode | None) -> None:
        if node is None:
            return
        if isinstance(node, ScalarNode) and node.value is None:
            return
        if node.invalid:
            step.params_broken = True
            return
        if not isinstance(node, MapNode) or looks_like_template_map(node):
            step.params_broken = True
            self.wrong_type(node, f"the params of {step.event or 'this step'}", "a mapping of param names to values")
            return
        step.params_node = node
        for key_node, value_node in node.pairs:
            if key_node.text == "decide":  # the seed format puts decide inside params
                step.decide = self.string(value_node, "'decide'")
                step.decide_node = value_node if isinstance(value_node, ScalarNode) else None
                continue
            step.params[key_node.text] = self.value(value_node, (key_node.text,))
            step.param_keys[key_node.text] = key_node

    def retry(self, node: AnyNode | None, step_node: MapNode) -> Retry | None:
        if node is None or (isinstance(node, ScalarNode) and node.value is None):
            self.key_error(step_node, "retry", rules.EMPTY_RETRY, "an empty retry does nothing",
                           "write retry: {attempts: 3, delay: 1s} or remove it")
            return None
        if not isinstance(node, MapNode):
            self.wrong_type(node, "'retry'", "a mapping such as {attempts: 3, delay: 1s}")
            return None
        self.check_keys(node, RETRY_KEYS, "retry")
        retry = Retry(node=node)
        if not node.pairs:
            self.error(rules.EMPTY_RETRY, "an empty retry does nothing", node, "write retry: {attempts: 3, delay: 1s} or remove it")
            return None
        attempts = self.integer(node.get("attempts"), "retry attempts", rules.EMPTY_RETRY, 1, MAX_ATTEMPTS)
        if node.get("attempts") is None:
            self.error(rules.EMPTY_RETRY, "retry needs 'attempts' (every try counts, the first included)", node, "add attempts: 3")
        elif attempts == 1:
            self.error(rules.EMPTY_RETRY, "retry with attempts: 1 never retries (attempts counts every try, the first included)",
                       node.get("attempts") or node, "use attempts: 2 or more, or remove retry")
        if attempts:
            retry.attempts = attempts
        retry.delay = self.duration(node.get("delay"), "retry delay") or 0.0
        backoff = node.get("backoff")
        if backoff is not None:
            value = backoff.value if isinstance(backoff, ScalarNode) else None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1.0 <= value <= 10.0:
                self.error(rules.BAD_LIMIT, "retry backoff must be a number from 1.0 to 10.0", backoff)
            else:
                retry.backoff = float(value)
        retry.max_delay = self.duration(node.get("max_delay"), "retry max_delay")
        read_retry_options(self, node, retry)  # on, jitter (model/build_retry.py)
        return retry

    def common(self, step: StepBase, node: MapNode, skip_if: bool = False) -> None:
        id_node = node.get("id")
        if id_node is not None:
            name = self.string(id_node, "'id'")
            if name is not None and isinstance(id_node, ScalarNode):
                if not IDENT.match(name):
                    self.error(rules.INVALID_ID, f"step id '{name}' must match [a-z][a-z0-9_]*", id_node,
                               "ids are lowercase words with digits and underscores, no dots")
                elif name in RESERVED_NAMES:
                    self.error(rules.INVALID_ID, f"'{name}' is reserved and cannot be a step id", id_node, "choose another name")
                else:
                    step.id, step.id_node = name, id_node
        if not skip_if:
            step.if_ = self.condition(node.get("if"), "'if'")
        foreach = node.get("foreach")
        if isinstance(foreach, SeqNode) and not foreach.invalid:
            step.foreach = self.literal_list(foreach)
        else:
            step.foreach = self.condition(foreach, "'foreach'")
        as_node = node.get("as")
        if as_node is not None:
            if node.get("foreach") is None:
                self.key_error(node, "as", rules.WRONG_TYPE, "'as' names the loop variable of 'foreach', which this step lacks")
            name = self.string(as_node, "'as'")
            if name is not None and isinstance(as_node, ScalarNode):
                if not IDENT.match(name) or name in RESERVED_NAMES - {"item"}:
                    self.error(rules.INVALID_ID, f"loop variable '{name}' must be a lowercase name that is not reserved", as_node)
                else:
                    step.as_, step.as_node = name, as_node
        max_parallel = node.get("max_parallel")
        if max_parallel is not None:
            if step.foreach is None and not (isinstance(step, BlockStep) and step.parallel):
                self.key_error(node, "max_parallel", rules.BAD_LIMIT,
                               "max_parallel bounds a parallel group or the items of a foreach; this step has neither")
            else:
                step.max_parallel = self.integer(max_parallel, "max_parallel", rules.BAD_LIMIT, *LIMIT_RANGES["max_parallel"])
        step.timeout = self.duration(node.get("timeout"), "timeout")
        on_error = node.get("on_error")
        if on_error is not None:
            value = self.string(on_error, "'on_error'")
            if value in ON_ERROR:
                step.on_error = value  # type: ignore[assignment]
            elif value is not None:
                guess = closest(value, ON_ERROR)
                self.error(rules.WRONG_TYPE, f"on_error must be one of fail, continue, break; got '{value}'", on_error,
                           f"did you mean '{guess}'?" if guess else None)
        description = node.get("description")
        if description is not None:
            step.description = self.string(description, "'description'")

    # -- hooks --

    def hooks(self, node: AnyNode | None) -> list[Hook]:
        if node is None:
            return []
        if not isinstance(node, SeqNode):
            self.wrong_type(node, "'hooks'", "a list of hooks")
            return []
        return [hook for i, item in enumerate(node.items) if (hook := self.hook(item, i)) is not None]

    def hook(self, node: AnyNode, index: int) -> Hook | None:
        if not isinstance(node, MapNode):
            self.wrong_type(node, "a hook", "a mapping with trigger: and action:")
            return None
        self.check_keys(node, HOOK_KEYS, "a hook")
        hook = Hook(node=node, index=index, file=self.source.path)
        id_node = node.get("id")
        if id_node is not None:
            name = self.string(id_node, "hook 'id'")
            if name is not None and isinstance(id_node, ScalarNode):
                if not re.match(r"^[a-z][a-z0-9_-]*$", name):
                    self.error(rules.INVALID_ID, f"hook id '{name}' must match [a-z][a-z0-9_-]*", id_node)
                else:
                    hook.id, hook.id_node = name, id_node
        label = hook.id or str(index + 1)
        trigger = node.get("trigger")
        if trigger is None:
            self.error(rules.HOOK_TRIGGER, "a hook needs a trigger", node, "add trigger: post:EVENT (or pre:EVENT)")
        else:
            text = self.string(trigger, "'trigger'")
            if text is not None and isinstance(trigger, ScalarNode):
                hook.trigger = self.trigger(trigger, text)
        hook.condition = self.condition(node.get("condition"), "hook 'condition'")
        priority = node.get("priority")
        if priority is not None:
            hook.priority = self.integer(priority, "priority", rules.WRONG_TYPE, -1_000_000, 1_000_000) or 0
        after = node.get("after")
        if after is not None:
            items = after.items if isinstance(after, SeqNode) else [after]
            for item in items:
                name = self.string(item, "'after'")
                if name is not None and isinstance(item, ScalarNode):
                    hook.after.append((name, item))
        action = node.get("action")
        if action is not None:
            hook.action_node = action
            hook.action = self.steps(action, f"hook:{label}.", "a hook 'action'")
        cancel = self.boolean(node.get("cancel"), "'cancel'")
        hook.cancel = bool(cancel)
        set_node = node.get("set")
        if set_node is not None:
            hook.set, _ = self.mapping_of_values(set_node, "'set'")
            hook.set_node = set_node if isinstance(set_node, MapNode) else None
        mode = node.get("mode")
        if mode is not None:
            value = self.string(mode, "'mode'")
            if value in HOOK_MODES:
                hook.mode = value
            elif value is not None:
                self.error(rules.WRONG_TYPE, f"mode must be one of {', '.join(HOOK_MODES)}; got '{value}'", mode,
                           (f"did you mean '{g}'?" if (g := closest(value, HOOK_MODES)) else None))
        hook.max = self.integer(node.get("max"), "max", rules.BAD_LIMIT, 1, 1024)
        hook.max_depth = self.integer(node.get("max_depth"), "max_depth", rules.BAD_LIMIT, *LIMIT_RANGES["max_depth"])
        on_error = node.get("on_error")
        if on_error is not None:
            value = self.string(on_error, "'on_error'")
            if value in ("continue", "fail"):
                hook.on_error = value
            elif value is not None:
                self.error(rules.WRONG_TYPE, f"a hook's on_error is continue or fail; got '{value}'", on_error,
                           (f"did you mean '{g}'?" if (g := closest(value, ("continue", "fail"))) else
                            "continue (the default) records a failing action; fail also fails what triggered it"))
        description = node.get("description")
        if description is not None:
            hook.description = self.string(description, "'description'")
        self.hook_shape(hook, node)
        return hook

    def hook_shape(self, hook: Hook, node: MapNode) -> None:
        phase = hook.trigger.phase if hook.trigger else None
        acts = bool(hook.action) or bool(hook.set) or hook.cancel
        # an option that is present but was rejected has been reported already
        rejected = (
            (node.get("action") is not None and not isinstance(node.get("action"), SeqNode))
            or (node.get("set") is not None and not isinstance(node.get("set"), MapNode))
            or (node.get("cancel") is not None and not (isinstance(node.get("cancel"), ScalarNode)
                                                         and isinstance(node.get("cancel").value, bool)))  # type: ignore[union-attr]
        )
        if not acts and not rejected:
            self.error(rules.HOOK_ACTION, "this hook does nothing", node,
                       "give it an action: (steps), or for pre: hooks set: {param: value} or cancel: true")
        if phase in ("post", "error"):
            why = "the event has already run" if phase == "post" else "an error: hook cannot undo the failure"
            for key in ("cancel", "set"):
                if node.key_node(key) is not None:
                    self.key_error(node, key, rules.HOOK_ACTION, f"'{key}' only works on pre: hooks ({why})",
                                   f"use trigger: pre:{hook.trigger.pattern if hook.trigger else 'EVENT'}")
        if hook.cancel and (hook.action or hook.set):
            self.key_error(node, "cancel", rules.HOOK_ACTION, "a hook that cancels the event cannot also set params or run an action")
        if hook.max is not None and hook.mode != "parallel":
            self.key_error(node, "max", rules.HOOK_ACTION, "'max' bounds mode: parallel only")

    def trigger(self, node: ScalarNode, text: str) -> Trigger | None:
        phase, sep, pattern = text.partition(":")
        if not sep or phase not in ("pre", "post", "error"):
            guess = "post:" + text if not sep and EVENT_GLOB.match(text) and ("." in text or "*" in text) else None
            self.error(rules.HOOK_TRIGGER, f"trigger '{text}' must be pre:EVENT, post:EVENT or error:EVENT", node,
                       f"did you mean '{guess}'?" if guess else
                       "the phase is pre (before the event), post (after it ends ok) or error (after it fails)")
            return None
        pattern = pattern.strip()
        if not EVENT_GLOB.match(pattern) or "." not in pattern and "*" not in pattern:
            self.error(rules.HOOK_TRIGGER, f"'{pattern}' is not an event name or glob", node,
                       "use a dotted event name (email.received) or a glob (email.*)")
            return None
        return Trigger(phase, pattern, node)  # type: ignore[arg-type]

    # -- top level --

    def inputs(self, node: AnyNode | None, chain: Chain) -> None:
        if node is None:
            return
        if not isinstance(node, MapNode):
            self.wrong_type(node, "'inputs'", "a mapping of input names to JSON Schemas")
            return
        for key_node, schema_node in node.pairs:
            name = key_node.text
            if not INPUT_NAME.match(name):
                self.error(rules.INVALID_ID, f"input name '{name}' must be a name like thread_id", key_span(key_node))
                continue
            if schema_node is None or (isinstance(schema_node, ScalarNode) and schema_node.value is None):
                schema: dict[str, Any] = {}
            elif isinstance(schema_node, MapNode):
                from chainlang.load.loader import to_data

                schema = to_data(schema_node)
            elif isinstance(schema_node, ScalarNode) and schema_node.value in ("string", "integer", "number", "boolean", "array", "object"):
                schema = {"type": schema_node.value}  # shorthand: `name: string`
            else:
                self.wrong_type(schema_node, f"input '{name}'", "a JSON Schema mapping such as {type: string}")
                continue
            chain.inputs[name] = Input(name, key_node, schema, schema_node)

    def limits(self, node: AnyNode | None) -> Limits:
        limits = Limits()
        if node is None:
            return limits
        if not isinstance(node, MapNode):
            self.wrong_type(node, "'limits'", "a mapping")
            return limits
        limits.node = node
        self.check_keys(node, LIMIT_KEYS, "limits")
        for key in LIMIT_RANGES:
            value = self.integer(node.get(key), key, rules.BAD_LIMIT, *LIMIT_RANGES[key])
            if value is not None:
                setattr(limits, key, value)
        limits.max_depth_set = node.get("max_depth") is not None
        limits.timeout = self.duration(node.get("timeout"), "limits timeout")
        return limits

    def allow(self, node: AnyNode | None) -> list[tuple[str, ScalarNode]] | None:
        if node is None:
            return None
        items = node.items if isinstance(node, SeqNode) else None
        if items is None:
            self.wrong_type(node, "'allow'", "a list of event names or globs")
            return None
        out = []
        for item in items:
            text = self.string(item, "an allow entry")
            if text is None or not isinstance(item, ScalarNode):
                continue
            if not EVENT_GLOB.match(text):
                self.error(rules.BAD_ALLOW, f"'{text}' is not an event name or glob", item, "write names like email.search or globs like email.*")
                continue
            if "." not in text and not any(c in text for c in "*?["):
                self.error(rules.BAD_ALLOW, f"'{text}' can never match: event names are dotted", item,
                           f"allow the whole namespace with '{text}.*', or name one event such as '{text}.search'")
                continue
            out.append((text, item))
        return out

    def events(self, node: AnyNode | None, chain: Chain) -> None:
        if node is None:
            return
        if not isinstance(node, MapNode):
            self.wrong_type(node, "'events'", "a mapping of event names to {description, payload}")
            return
        from chainlang.load.loader import to_data

        for key_node, decl in node.pairs:
            name = key_node.text
            if not self.event_name(key_node, name):
                continue
            description, payload, payload_at = "", {}, None
            if isinstance(decl, MapNode):
                self.check_keys(decl, EVENT_DECL_KEYS, f"the declaration of {name}")
                description = self.string(decl.get("description"), "'description'") or ""
                payload_node = decl.get("payload")
                if isinstance(payload_node, MapNode):
                    payload, payload_at = to_data(payload_node), payload_node
                elif payload_node is not None:
                    self.wrong_type(payload_node, "'payload'", "a JSON Schema mapping")
            elif not (isinstance(decl, ScalarNode) and decl.value is None):
                self.wrong_type(decl, f"the declaration of {name}", "a mapping with description and payload")
            chain.events[name] = EventDecl(name, key_node, description, payload, payload_at)


def _kind_phrase(node: AnyNode) -> str:
    if isinstance(node, ScalarNode):
        if node.value is None:
            return "null" if node.text else "nothing"
        if isinstance(node.value, bool):
            return f"the boolean {node.text}"
        if isinstance(node.value, (int, float)):
            return f"the number {node.text}"
        return f"the string '{_short(node.value)}'"
    return "a list" if isinstance(node, SeqNode) else "a mapping"


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_chain(root: AnyNode | None, source: SourceFile, sink: DiagnosticSink, kind: str = "chain") -> Chain:
    builder = ModelBuilder(source, sink)
    chain = Chain(file=source.path, kind=kind, root=root)  # type: ignore[arg-type]
    if root is None:
        if not sink.items:
            what = "hooks" if kind == "hooks" else "steps"
            hint = ("a hooks file is a list of hooks, or a mapping with events: and hooks:" if kind == "hooks"
                    else "a chain is a list of steps, or a mapping with steps:")
            sink.add(rules.NOT_A_CHAIN, f"the file is empty: a {kind} file needs {what}", Span.point(1, 1), hint)
        return chain
    if kind == "hooks":
        _build_hooks_file(builder, root, chain)
        return chain
    if isinstance(root, SeqNode):
        chain.steps = builder.steps(root, "")
        chain.outputs = reply_outputs(chain.steps)
        if not root.items:
            sink.add(rules.NOT_A_CHAIN, "the chain has no steps", root.span)
        return chain
    if isinstance(root, ScalarNode) and root.value is None and not root.text:
        sink.add(rules.NOT_A_CHAIN, "the file is empty: a chain file needs steps", Span.point(1, 1),
                 "a chain is a list of steps, or a mapping with steps:")
        return chain
    if not isinstance(root, MapNode):
        sink.add(rules.NOT_A_CHAIN, f"a chain file must be a list of steps or a mapping with steps:, not {_kind_phrase(root)}",
                 root.span, "start with `steps:` and list the steps below it")
        return chain
    builder.check_keys(root, TOP_KEYS, "the chain")
    _version(builder, root)
    name_node = root.get("chain")
    if name_node is not None:
        name = builder.string(name_node, "'chain'")
        if name is not None and isinstance(name_node, ScalarNode) and builder.event_name(name_node, name):
            chain.name, chain.name_node = name, name_node
    description = root.get("description")
    if description is not None:
        chain.description = builder.string(description, "'description'")
    builder.inputs(root.get("inputs"), chain)
    steps_node = root.get("steps")
    if root.key_node("steps") is None:
        sink.add(rules.NOT_A_CHAIN, "the chain has no 'steps:'", root.span, "add steps: with a list of steps")
    elif isinstance(steps_node, SeqNode) and not steps_node.items or (
            isinstance(steps_node, ScalarNode) and steps_node.value is None and not steps_node.text):
        sink.add(rules.NOT_A_CHAIN, "the chain has no steps", root.key_node("steps").span,  # type: ignore[union-attr]
                 "list the steps below steps:")
        steps_node = None
    chain.steps = builder.steps(steps_node, "")
    chain.hooks = builder.hooks(root.get("hooks"))
    chain.outputs, _ = builder.mapping_of_values(root.get("outputs"), "'outputs'")
    if root.key_node("outputs") is None:  # a chain that ends with its answer: outputs {reply}
        chain.outputs = reply_outputs(chain.steps)
    chain.limits = builder.limits(root.get("limits"))
    chain.allow = builder.allow(root.get("allow"))
    builder.events(root.get("events"), chain)
    chain.triggers = build_triggers(builder, root.get("triggers"))
    return chain


def _version(builder: ModelBuilder, root: MapNode) -> None:
    node = root.get("chainlang")
    if node is None:
        return
    if not (isinstance(node, ScalarNode) and type(node.value) is int and node.value == 1):
        builder.error(rules.BAD_VERSION, f"unsupported chainlang version {node.text if isinstance(node, ScalarNode) else '?'}",
                      node, "this release reads version 1: write chainlang: 1")


def _build_hooks_file(builder: ModelBuilder, root: AnyNode, chain: Chain) -> None:
    if isinstance(root, SeqNode):
        chain.hooks = builder.hooks(root)
        return
    if not isinstance(root, MapNode):
        builder.sink.add(rules.NOT_A_CHAIN, "a hooks file is a list of hooks, or a mapping with events: and hooks:", root.span)
        return
    builder.check_keys(root, HOOKS_FILE_KEYS, "a hooks file")
    _version(builder, root)
    chain.hooks = builder.hooks(root.get("hooks"))
    builder.events(root.get("events"), chain)

