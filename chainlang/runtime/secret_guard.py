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

On Temporal the tools run on the workers, which read the secrets from their own
environment (a run there has no `{secrets.NAME}`: CL038), so the refusal is made there:
the workflow only keeps each step's `expose` (`Exposures`, installed by the run host when
an executor runs the tools elsewhere) and sends it with the tool call, and the tool
activity refuses the call (`sink_refusal`, on the worker's declared secrets) before the
tool runs. Both engines record a refusal the same way: one attempt of the step, failed
with type `secret`, its event not called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlang.registry.sinks import sink_of
from chainlang.runtime.interceptors import PassThrough, Refused, StepInfo
from chainlang.status import SECRET

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig
    from chainlang.registry.registry import Registry
    from chainlang.runtime.secret_refs import RunSecrets

__all__ = ["Exposures", "SecretGuard", "readable_secrets", "refusal", "secret_guard", "secrets_in", "sink_refusal"]

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


def refusal(path: str, event: str, sink: str, leaked: list[str]) -> dict[str, Any]:
    """The error of a step refused for sending `leaked` (names) to `sink`: the same words on
    both engines, the names and never the values."""
    names = ", ".join(f"secrets.{name}" for name in leaked)
    listed = ", ".join(leaked)
    return {"type": SECRET,
            "message": (f"step {path} ({event}) would send the value of {names} to {sink}; "
                        f"add expose: [{listed}] to the step if it must, or do not send it")}


def sink_refusal(path: str, event: str, sink: str | None, params: Any, values: dict[str, str],
                 exposed: set[str] | frozenset[str]) -> dict[str, Any] | None:
    """The refusal of a step whose params hold a secret of `values` it does not expose, when
    its event is a sink (`sink`, chainlang.registry.sinks.sink_of); None when it may run."""
    if sink is None or not values:
        return None
    leaked = [name for name in secrets_in(params, values) if name not in exposed]
    return refusal(path, event, sink, leaked) if leaked else None


def readable_secrets(config: "ProjectConfig | None") -> dict[str, str]:
    """Every declared secret of `config` that can be read here, by name (a Temporal worker's,
    from its own environment); one that cannot be read is one no value of this process can
    carry."""
    from chainlang.config.secrets import MissingSecret, secret_value

    values: dict[str, str] = {}
    if config is None:
        return values
    for name in sorted(config.secrets):
        try:
            values[name] = secret_value(config, name)
        except MissingSecret:
            continue
    return values


class Exposures(PassThrough):
    """Each step's `expose`, by path, as the run meets the steps: what a step may send is its
    own `expose` and that of every step above it (the calling steps of its sub-chains)."""

    def __init__(self) -> None:
        self.exposed_at: dict[str, tuple[str, ...]] = {}  # the path of a step with `expose` → its names

    def of(self, path: str) -> set[str]:
        """The names the step at `path` may send (its own, once `before` met it, and its callers')."""
        names = set(self.exposed_at.get(path, ()))
        for above, more in self.exposed_at.items():
            if path.startswith(above + "/"):
                names.update(more)
        return names

    async def before(self, step: StepInfo, params: dict[str, Any]) -> dict[str, Any]:
        if step.expose:
            self.exposed_at[step.path] = step.expose
        return params


class SecretGuard(Exposures):
    """Refuses a sink step whose params hold a secret it does not expose (see the module)."""

    def __init__(self, secrets: "RunSecrets", registry: "Registry") -> None:
        super().__init__()
        self.secrets = secrets
        self.registry = registry
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
                    values[name] = self.secrets.value(name)  # added to the run's redactor
                except MissingSecret:
                    continue
            self._values = values
        return self._values

    async def before(self, step: StepInfo, params: dict[str, Any]) -> dict[str, Any]:
        await super().before(step, params)
        sink = sink_of(step.event, self.registry.get(step.event))
        if sink is None and step.decide_model:
            sink = "the decide model (the step's decide: text)"
        if sink is None:
            return params
        refused = sink_refusal(step.path, step.event, sink, params, self.values(), self.of(step.path))
        if refused is None:
            return params
        # one attempt of the step, failed: as the Temporal workers record their refusal
        raise Refused("failed", refused, as_attempt=True)


def secret_guard(registry: "Registry") -> SecretGuard | None:
    """The guard of the run being opened, when it knows its project's secrets."""
    from chainlang.runtime.secret_refs import CURRENT

    secrets = CURRENT.get()
    if secrets is None or secrets.config is None or not secrets.config.secrets:
        return None
    return SecretGuard(secrets, registry)
