"""What each reference of a checked chain names: produced once by the checker's scope
analysis (chainlang.checks.scope), carried by the compiled graph, used by the runtime
as it is (chainlang.runtime.scope turns each into an accessor; it resolves nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

BindingKind = Literal["latest", "path", "id", "input", "run", "loop", "thread", "secret", "payload", "event",
                      "captured", "live"]


@dataclass(frozen=True, slots=True)
class Binding:
    """One reference, resolved.

    - `latest`: the most recent step of event `name` that ran (`tools.now.result`);
    - `path`: one occurrence of an event by index (`tools.now[0]`): the step at `name`,
      its static path;
    - `id`: the step with id `name`;
    - `input`, `run`: the chain's inputs / the run's facts;
    - `loop`: the loop variable `name`; `thread`, `payload`, `event`: hooks and threads;
    - `live`: the run as it stands (`run.status`, `run.duration_ms`, `run.failures`: `name`),
      read when evaluated (chainlang.runtime.live_run);
    - `secret`: the declared secret `name` (LANGUAGE.md §16, chainlang.runtime.secret_refs);
    - `captured`: in a stored hook or task, a value of the registering chain captured when
      it registered it (`name` is the reference as written, `tools.now.date`).

    `captured` on any other kind: the reference names something of the chain that
    registers the action it sits in (read when the registering step runs).

    For steps, `field` is the step field read (`result`, `status`, ...); `path` holds the
    segments after it (after the name, for the other kinds)."""

    kind: BindingKind
    name: str = ""
    field: str = "result"
    path: tuple[Any, ...] = ()
    captured: bool = False


@dataclass
class ChainBindings:
    """The bindings of one chain's steps and outputs, by `id()` of the Ref node (AST nodes
    are shared between expressions of the same text; a binding does not depend on where
    the text appears in the chain), and the `decide` texts that are expressions over
    names the chain knows (by `id()` of the step), parsed."""

    refs: dict[int, Binding] = field(default_factory=dict)
    decide: dict[int, Any] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list, repr=False)  # keeps every bound Ref alive: its id() stays its own
