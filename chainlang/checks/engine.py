"""CL038: in a project whose chainlang.toml runs chains on Temporal (`[engine] kind =
"temporal"`), a step (or a hook's action) calls an event that engine cannot run yet
(chainlang.engine.temporal.support): told by the checker, before a run fails on it. A
chain file outside any project is not reported."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from chainlang.checks.base import CheckContext
from chainlang.diagnostics import rules
from chainlang.model.nodes import EventStep, walk_steps

if TYPE_CHECKING:
    from chainlang.config.project import ProjectConfig

RULES = (rules.NOT_ON_ENGINE,)


@lru_cache(maxsize=64)
def _temporal_project(directory: str) -> "ProjectConfig | None":
    """The config of the project of `directory` when it runs on Temporal (None: it does not,
    there is no project, or its chainlang.toml cannot be read, which another stage reports)."""
    from chainlang.config.project import find_project_config
    from chainlang.registry.errors import RegistryError

    try:
        config = find_project_config(Path(directory))
    except (RegistryError, OSError):
        return None
    if config is None or config.engine is None or config.engine.kind != "temporal":
        return None
    return config


def check(ctx: CheckContext) -> None:
    file = ctx.chain.file
    directory = str(Path(file).resolve().parent) if file and not file.startswith("<") else str(Path.cwd())
    config = _temporal_project(directory)
    if config is None:
        return
    from chainlang.engine.temporal.support import THREAD_REFERENCES, unsupported

    for info in ctx.analysis.refs:
        if info.kind == "thread":
            site, ref = info.site, info.ref
            text = site.node.text[site.base + ref.start:site.base + ref.end] if hasattr(site.node, "text") else "thread"
            ctx.report(rules.NOT_ON_ENGINE, f"{{{text}}} cannot be read on the Temporal engine yet ({THREAD_REFERENCES})",
                       ctx.expr_span(site.node, site.base + ref.start, site.base + ref.end),
                       'run this chain on the embedded engine (a project without [engine] kind = "temporal"), or '
                       "read the thread with a step (thread.summarize, memory.search) and use its result")
    steps = walk_steps(ctx.chain.steps) + [s for hook in ctx.chain.hooks for s in walk_steps(hook.action)]
    for step in steps:
        if not isinstance(step, EventStep) or not step.event or step.event_node is None:
            continue
        spec = ctx.registry.get(step.event)
        why = unsupported(spec, config) if spec is not None else None
        if why is not None:
            ctx.report(rules.NOT_ON_ENGINE, f"{step.event} cannot run on the Temporal engine yet ({why})",
                       step.event_node,
                       'run this chain on the embedded engine (a project without [engine] kind = "temporal"), '
                       "or leave this event out of it")
