"""`retry.on` and `retry.jitter` (LANGUAGE.md §2, retry by error type), read into the
step's `Retry` and checked: CL056 bad-retry-on (an `on` that is not a non-empty list of
error types), CL057 retry-on-never (a type that `retry` never tries again, or that looks
like a misspelt one of chainlang's types).

Called by ModelBuilder.retry (model/build.py); the decision at run time is
chainlang.status.retryable, which reads the same sets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chainlang.diagnostics import rules
from chainlang.diagnostics.suggest import closest
from chainlang.load.loader import MapNode, ScalarNode, SeqNode
from chainlang.status import CANCELLED, CHAIN, ERROR_TYPE_FORM, FAILED, INTERRUPTED, LIMIT, NEVER_RETRIED, RETRIED

if TYPE_CHECKING:
    from chainlang.model.build import ModelBuilder
    from chainlang.model.nodes import Retry

__all__ = ["never_retried_reason", "read_retry_options"]

_BEFORE_THE_CALL = frozenset({"params", "decide", "expression", "foreach", "unavailable", "not_allowed", "secret"})
_STOPS = {
    CANCELLED: "a cancelled step was stopped from outside (a sibling failed, the run stopped, a hook cancelled it)",
    LIMIT: "a limit stops the whole run",
    "fail": "a `fail:` step fails on purpose",
    INTERRUPTED: "an interrupted run goes on with `chainlang resume`",
    CHAIN: "a sub-chain's failure is not retried: give the sub-chain's own steps a retry",
    FAILED: "`failed` is only read back from old transcripts",
}


def never_retried_reason(kind: str) -> str:
    """Why `retry` never tries a failure of type `kind` again (kind in NEVER_RETRIED)."""
    if kind in _STOPS:
        return _STOPS[kind]
    if kind in _BEFORE_THE_CALL:
        return f"a `{kind}` failure happens before the tool is called, and another attempt would fail the same way"
    return f"`{kind}` is not the failure of a tool's attempt"


def read_retry_options(builder: "ModelBuilder", node: MapNode, retry: "Retry") -> None:
    """Set `retry.on` and `retry.jitter` from the retry mapping `node`, reporting what is wrong."""
    jitter = node.get("jitter")
    if jitter is not None:
        retry.jitter = builder.boolean(jitter, "retry jitter") is True
    if node.key_node("on") is None:
        return
    on = node.get("on")
    if on is not None and on.invalid:  # already reported by the loader
        return
    if on is None or (isinstance(on, ScalarNode) and on.value is None):
        builder.key_error(node, "on", rules.BAD_RETRY_ON, "retry on: is empty",
                          "list the error types to retry, e.g. on: [timeout, tool_error], or remove on")
        return
    if isinstance(on, ScalarNode) and isinstance(on.value, str) and ERROR_TYPE_FORM.fullmatch(on.value):
        builder.error(rules.BAD_RETRY_ON, "retry on: must be a list of error types", on, f"write on: [{on.value}]")
        return
    if not isinstance(on, SeqNode):
        builder.error(rules.BAD_RETRY_ON, "retry on: must be a list of error types, such as [timeout]", on)
        return
    if not on.items:
        builder.error(rules.BAD_RETRY_ON, "retry on: [] retries nothing", on,
                      "list the error types to retry, e.g. on: [timeout], or remove retry")
        return
    kinds: list[str] = []
    never: list[str] = []
    for item in on.items:
        if item.invalid:
            continue
        kind = item.value if isinstance(item, ScalarNode) and isinstance(item.value, str) else None
        if kind is None or not ERROR_TYPE_FORM.fullmatch(kind):
            shown = f"'{item.text}'" if isinstance(item, ScalarNode) else "a " + ("list" if isinstance(item, SeqNode) else "mapping")
            builder.error(rules.BAD_RETRY_ON, f"retry on: {shown} is not an error type", item,
                          "an error type is lowercase letters, digits and _, starting with a letter: "
                          "timeout, tool_error, result, or a type a tool raises with chainlang.StepError")
            continue
        if kind in kinds:
            builder.error(rules.BAD_RETRY_ON, f"retry on: '{kind}' is listed twice", item, "remove one")
            continue
        kinds.append(kind)
        if kind in NEVER_RETRIED:
            never.append(kind)
            builder.error(rules.RETRY_ON_NEVER, f"retry on: '{kind}' is never retried: {never_retried_reason(kind)}",
                          item, "retry these types: " + ", ".join(sorted(RETRIED)) + ", or a tool's own type")
            continue
        guess = closest(kind, RETRIED) if kind not in RETRIED else None
        if guess is not None:
            builder.error(rules.RETRY_ON_NEVER, f"retry on: '{kind}' is not a type chainlang gives a failure", item,
                          f"did you mean '{guess}'? (a type a tool raises with chainlang.StepError is fine as it is)")
    retry.on = tuple(kinds)
