"""Implementations of the standard events declared in `stdlib/*.yaml`.

Each declaration's `implementation: chainlang.stdlib.MODULE:FUNCTION` names a
function here; the registry imports the module only when the event runs.
Implemented so far: `tools.now`, `tools.date_calc` (module `tools`) and
`user.notify` (module `user`). The other standard events are declared, so
chains that use them are checked, and are implemented in later releases.

A function takes the event's params as keyword arguments, by the names of its
params schema, plus `ctx` (a `chainlang.runtime.context.RunContext`). Invalid
input raises `ValueError` with a one-line message, which the interpreter turns
into the step's error.
"""
