"""Cross-cutting behaviour around event steps, as interceptors (the shape Temporal's SDK
gives its workers): the step pipeline (chainlang.runtime.step) calls every interceptor of
the run at fixed points, and knows none of them by name.

- `admit(step)`: before anything else; an error (a dict) fails the step at once. The
  allow lists of §8 are an interceptor; budgets (§13) will be another.
- `before(step, params)`: once the params are rendered; returns the params to use
  (changed or not), or raises `Refused` to end the step there (`cancelled`, or `failed`).
  Pre hooks (§6.1) plug in here.
- `after(step, params, result)`: after a step ended ok (also for a step whose outcome a
  resume takes from the transcript). Post hooks plug in here, and budget accounting.

A run with no interceptor pays nothing for the seam.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from chainlang.status import NOT_ALLOWED


class Refused(Exception):
    """Raised by `before` to end the step without calling its event: `status` is
    `cancelled` (the chain goes on, as after a skipped step) or `failed`. `as_attempt`: the
    failure is recorded as an attempt of the call (with its `max_attempts`), as an engine
    that refuses inside the call records it (the secret guard, chainlang.runtime.secret_guard)."""

    def __init__(self, status: Literal["cancelled", "failed"], error: dict[str, Any], as_attempt: bool = False) -> None:
        super().__init__(error.get("message", status))
        self.status = status
        self.error = error
        self.as_attempt = as_attempt


@dataclass(frozen=True, slots=True)
class StepInfo:
    """The step an interceptor is asked about."""

    path: str  # the step path of this execution (`3`, `2[1]`, `4/1`)
    event: str
    chain: str | None  # the chain's name
    file: str  # the chain's file
    step_id: str | None = None  # the step's `id`, when the pipeline gives it (threads record it as a named value)
    expose: tuple[str, ...] = ()  # the secrets the step may send to a model or user.notify (§16)
    decide_model: bool = False  # its `decide` is text for the decide model (its params go there)


class Interceptor(Protocol):
    def admit(self, step: StepInfo) -> dict[str, Any] | None: ...

    async def before(self, step: StepInfo, params: dict[str, Any]) -> dict[str, Any]: ...

    async def after(self, step: StepInfo, params: dict[str, Any], result: Any) -> None: ...


class PassThrough:
    """An interceptor that does nothing: subclass it and override what you need."""

    def admit(self, step: StepInfo) -> dict[str, Any] | None:
        return None

    async def before(self, step: StepInfo, params: dict[str, Any]) -> dict[str, Any]:
        return params

    async def after(self, step: StepInfo, params: dict[str, Any], result: Any) -> None:
        return None


class AllowList(PassThrough):
    """`allow:` (§8): an event must match a pattern of every allow list in force — the
    chain's own and those of the chains that called it."""

    def __init__(self, lists: tuple[tuple[str, ...], ...]) -> None:
        self.lists = lists
        self._known: dict[str, bool] = {}

    def allowed(self, name: str) -> bool:
        known = self._known.get(name)
        if known is None:
            known = all(any(fnmatch.fnmatchcase(name, p) for p in patterns) for patterns in self.lists)
            self._known[name] = known
        return known

    def admit(self, step: StepInfo) -> dict[str, Any] | None:
        if self.allowed(step.event):
            return None
        also = " or of a chain that called it" if len(self.lists) > 1 else ""
        return {"type": NOT_ALLOWED, "message": f"{step.event} is not in the allow list of this chain{also}"}


__all__ = ["AllowList", "Interceptor", "PassThrough", "Refused", "StepInfo"]
