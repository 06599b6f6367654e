"""Compile: a checked chain → the frozen execution graph the runtime walks (`graph`), with
its references bound by the checker's analysis; and the graph drawn as mermaid, dot or
JSON for `chainlang graph` (`render`)."""

from chainlang.compile.graph import (
    CompiledValue,
    ExecutionGraph,
    GraphNode,
    compile_chain,
    copy_json,
    hook_order,
)

__all__ = ["CompiledValue", "ExecutionGraph", "GraphNode", "compile_chain", "copy_json", "hook_order"]
