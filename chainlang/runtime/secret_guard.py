"""The run-time half of the secrets taint rule (LANGUAGE.md §16): a step that would send a
secret's value to a model or to `user.notify` without `expose: [NAME]` fails before its
event runs, with an error of type `secret` that names the secret and the step, never the value.

The checker (chainlang.checks.secrets_flow) refuses the flows it can see in the chain
files. What it cannot see is caught here, on the rendered params: a chain a model wrote
(agent.chain) that passes on what a named chain returned, a value a tool read from the
environment or the store, the params a decide model filled. It is an interceptor
(chainlang.runtime.interceptors), so the same walker runs it on every engine; it is in
force when the run knows its project's secrets (`secret_refs.CURRENT`).

A step's `expose` also covers the steps of the sub-chains it runs (paths below it,
`4/1`), as the checker lets a calling step's `expose` cover the chain it calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.registry.sinks import sink_of
from chainlang.runtime.interceptors import PassThrough, Refused, StepInfo
from chainlang.status import SECRET

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry
    from chainlang.runtime.secret_refs import RunSecrets

__all__ = ["SecretGuard", "secret_guard", "secrets_in"]

MAX_SCANNED = 10_000  # values of one params tree looked at (a bound on the cost, not on what is found)


def secrets_in(value: Any, secrets: dict[str, str]) -> list[str]:
    """The names of the secrets whose value appears in `value` (a JSON tree: its strings and keys)."""
    found: set[str] = set()
    stack = [value]
    seen = 0
    while stack and seen < MAX_SCANNED and len(found) < len(secrets):
        item = stack.pop()
        seen += 1
        if isinstance(item, str):
            found.update(name for name, secret in secrets.items() if secret and secret in item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return sorted(found)


class SecretGuard(PassThrough):
    """Refuses a sink step whose params hold a secret it does not expose (see the module)."""

    def __init__(self, secrets: "RunSecrets", registry: "Registry") -> None:
        self.secrets = secrets
        self.registry = registry
        self.exposed_at: dict[str, tuple[str, ...]] = {}  # the path of a step with `expose` → its names
        self._values: dict[str, str] | None = None

    def values(self) -> dict[str, str]:
        """Every declared secret that can be read, by name (read once; one that cannot be read
        is one no value can carry: the run that needs it stopped before its first step)."""
        if self._values is None:
            from chainlang.config.secrets import MissingSecret

            values: dict[str, str] = {}
            config = self.secrets.config
            for name in sorted(config.secrets) if config is not None else ():
                try:
                    values[name] = self.secrets.value(name)
                except MissingSecret:
                    continue
            self._values = values
        return self._values

    def exposed(self, step: StepInfo) -> set[str]:
        names = set(step.expose)
        for path, more in self.exposed_at.items():
            if step.path.startswith(path + "/"):
                names.update(more)
        return names

    async def before(self, step: StepInfo, params: dict[str, Any]) -> dict[str, Any]:
        if step.expose:
            self.exposed_at[step.path] = step.expose
        sink = sink_of(step.event, self.registry.get(step.event))
        if sink is None and step.decide_model:
            sink = "the decide model (the step's decide: text)"
        if sink is None:
            return params
        values = self.values()
        if not values:
            return params
        leaked = [name for name in secrets_in(params, values) if name not in self.exposed(step)]
        if not leaked:
            return params
        names = ", ".join(f"secrets.{name}" for name in leaked)
        listed = ", ".join(leaked)
        raise Refused("failed", {
            "type": SECRET,
            "message": (f"step {step.path} ({step.event}) would send the value of {names} to {sink}; "
                        f"add expose: [{listed}] to the step if it must, or do not send it"),
            "secrets": leaked,
        })


def secret_guard(registry: "Registry") -> SecretGuard | None:
    """The guard of the run being opened, when it knows its project's secrets."""
    from chainlang.runtime.secret_refs import CURRENT

    secrets = CURRENT.get()
    if secrets is None or secrets.config is None or not secrets.config.secrets:
        return None
    return SecretGuard(secrets, registry)
