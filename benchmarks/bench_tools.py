"""The tool that benchmarks/run_bench.py runs: a no-op, so what is measured is the interpreter.

The chainlang runs load this file with `tools=[...]`; the asyncio and LangGraph baselines
call the very same function object (run_bench.py gets it through chainlang's tool loader).
"""

from __future__ import annotations

from typing import Any

from chainlang import event


@event("bench.noop", idempotent=True)
async def noop(value: Any = None) -> Any:
    """Return `value` unchanged."""
    return value
