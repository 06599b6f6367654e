"""A model's answer, read as JSON valid against the schema it was asked for.

A model's text is untrusted input: every answer a chain uses (the decide model's, the
agent events', `agent.chain`'s chain, the thread and memory tiers') passes here before it
is used. Beside the tiers that ask, so the run (`runtime.agent_chain`) and the standard
events (`stdlib`) read answers the same way without importing each other.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["parse_answer"]

_FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)\n?```", re.DOTALL)


def parse_answer(text: str, schema: dict[str, Any], who: str) -> Any:
    """A model's answer as JSON valid against `schema` (one ``` fence around it is allowed);
    a ValueError saying what is wrong otherwise. `who` names the model in the message."""
    from chainlang.schemas.cache import checker

    body = text.strip()
    fenced = _FENCE.fullmatch(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body)
    except ValueError:
        shown = " ".join(text.split())[:160]
        raise ValueError(f"{who}'s answer is not JSON: {shown!r}") from None
    except RecursionError:
        raise ValueError(f"{who}'s answer is JSON nested too deeply to be read") from None
    problems = checker(schema)(value)
    if problems:
        raise ValueError(f"{who}'s answer does not match the schema it was given: {'; '.join(problems[:3])}")
    return value
