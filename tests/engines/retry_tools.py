"""Tools of the both-engine retry case (retry-on.chain.yaml): failures with error types of
their own, raised with chainlang.StepError (issue 23, retry by error type)."""

from __future__ import annotations

from typing import Any

import chainlang
from chainlang import event


@event("shop.charge", description="Charge a card: a card that starts with 4000 is declined", idempotent=True)
def charge(card: str, kind: str = "declined") -> dict[str, Any]:
    if card.startswith("4000"):
        raise chainlang.StepError(kind, f"card {card} was declined")
    return {"charged": card}


@event("shop.poll", description="Ask a slow service: it times out until the given attempt", idempotent=True)
def poll(succeed_on: int, ctx: Any = None) -> int:
    attempt = int(ctx.attempt)
    if attempt < succeed_on:
        raise chainlang.StepError("timeout", f"the service did not answer in time (attempt {attempt})")
    return attempt
