"""The events that send their params out of the run's hands (LANGUAGE.md §16): to a model
(the agents, `model.ask`, and any event that uses a model tier) or to the user
(`user.notify`, and `agent.reply`, a turn's answer). A secret may reach one only through a
step that says `expose: [NAME]`: the checker (chainlang.checks.secrets_flow) and the run
(chainlang.runtime.secret_guard) both ask here."""

from __future__ import annotations

from typing import Any

__all__ = ["USER_SINKS", "sink_of"]

USER_SINKS = frozenset({"user.notify", "agent.reply"})  # shown to the user (agent.reply: a turn's answer)


def sink_of(event: str, spec: Any) -> str | None:
    """Where `event` sends its params, in the words of messages ("a model (agent.think)",
    "the user (user.notify)"); None for an event whose params stay with its tool."""
    if event in USER_SINKS:
        return f"the user ({event})"
    if event.startswith("agent.") or event == "model.ask":
        return f"a model ({event})"
    effects = getattr(spec, "effects", None) or {}
    if effects.get("uses_model") or getattr(spec, "model_calls", 0):
        return f"a model tier ({event})"
    return None
