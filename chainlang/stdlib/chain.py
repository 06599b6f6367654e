"""`chain.run`: declared in stdlib/chain.yaml, run by the interpreter itself.

Running a sub-chain needs the run (its depth, allow lists, transcript and clock), which a
tool function does not see; the interpreter recognises `chain.run` and never calls this.
"""

from __future__ import annotations

from typing import Any


def run(**params: Any) -> Any:
    raise RuntimeError("chain.run is run by the chainlang interpreter; it cannot be called as a function")
