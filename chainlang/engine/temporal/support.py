"""What the Temporal engine runs, and the one bound it adds, asked by the checker (CL038).

The walker runs inside the workflow, so the language itself (steps, if/else, foreach,
parallel groups, retry, timeouts, decide, hooks of the chain, named chains and chain.run,
these as child workflows) is the same. Each tool attempt is an activity, with the tool
context of the embedded engine, so the events of the project's store (task.*, memory.*, thread.*) run there too,
on the worker's store: give every worker the same one (a PostgreSQL `[store] url`, or one
host). Model calls are activities (chainlang.engine.temporal.models), under the run's
budget. A run attached to a thread records its steps there by activities too, and
`{thread.ID.KEY}` references are read ahead by activities (chainlang.engine.temporal.threadrefs).

What one workflow cannot hold is a run of too many steps: Temporal ends a workflow whose
history passes 51,200 events, and a step takes from about 3 (an activity scheduled,
started, completed) to 6 (with the workflow task that follows it). A named chain's steps
are in the history of their own child workflow. The bound is defined by the checker that
enforces it (chainlang.checks.engine, below the engine in the package graph).
"""

from __future__ import annotations

from chainlang.checks.engine import MAX_STEPS_IN_ONE_HISTORY

__all__ = ["MAX_STEPS_IN_ONE_HISTORY"]
