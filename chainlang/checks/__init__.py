"""The checks: one module per concern, run in this order over every file."""

from __future__ import annotations

from types import ModuleType


def all_checks() -> list[ModuleType]:
    from chainlang.checks import (
        allow,
        budget,
        chain_cycle,
        duplicate_ids,
        engine,
        expr_types,
        hook_events,
        hook_order,
        hook_recursion,
        loops,
        model_ask,
        models,
        params,
        references,
        schemas,
        secrets_flow,
        switch,
        triggers,
        unknown_event,
        waits,
    )

    return [
        unknown_event,
        allow,
        duplicate_ids,
        schemas,
        model_ask,
        references,
        expr_types,
        switch,
        waits,
        params,
        hook_events,
        hook_order,
        hook_recursion,
        triggers,
        chain_cycle,
        budget,
        loops,
        models,
        secrets_flow,
        engine,
    ]
