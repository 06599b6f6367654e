"""CL038: in a project whose chainlang.toml runs chains on Temporal (`[engine] kind =
"temporal"`), a step (or a hook's action) calls an event that engine cannot run yet
(chainlang.engine.temporal.support): told by the checker, before a run fails on it. A
chain file outside any project is not reported."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from chainlang.checks.base import CheckContext
from chainlang.diagnostics import rules
from chainlang.model.nodes import EventStep, walk_steps

RULES = (rules.NOT_ON_ENGINE,)


@lru_cache(maxsize=64)
def _engine(directory: str) -> str | None:
    """The engine of the project of `directory` (None: no project, or an unreadable
    chainlang.toml, which another stage reports)."""
    from chainlang.config.project import find_project_config
    from chainlang.registry.errors import RegistryError

    try:
        config = find_project_config(Path(directory))
    except (RegistryError, OSError):
        return None
    if config is None:
        return None
    return config.engine.kind if config.engine is not None else "embedded"


def check(ctx: CheckContext) -> None:
    file = ctx.chain.file
    directory = str(Path(file).resolve().parent) if file and not file.startswith("<") else str(Path.cwd())
    if _engine(directory) != "temporal":
        return
    from chainlang.engine.temporal.support import unsupported

    steps = walk_steps(ctx.chain.steps) + [s for hook in ctx.chain.hooks for s in walk_steps(hook.action)]
    for step in steps:
        if not isinstance(step, EventStep) or not step.event or step.event_node is None:
            continue
        spec = ctx.registry.get(step.event)
        why = unsupported(spec) if spec is not None else None
        if why is not None:
            ctx.report(rules.NOT_ON_ENGINE, f"{step.event} cannot run on the Temporal engine yet ({why})",
                       step.event_node,
                       'run this chain on the embedded engine (a project without [engine] kind = "temporal"), '
                       "or leave this event out of it")
