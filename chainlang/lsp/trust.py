"""Whether the language server may run the project's code.

Opening a file in an editor must not run the code of the repository it comes
from. A project's tools (the modules and `.py` files its chainlang.toml lists)
are imported to learn their events, and its MCP servers are started to list
theirs: both run code the user may never have read. So `chainlang lsp` does
neither until the user says the workspace is trusted, in one of two ways:

- the editor's `initializationOptions`: `{"chainlang": {"trustProject": true}}`;
- the environment of the server: `CHAINLANG_LSP_TRUST=1`.

Until then the server checks with the standard events, and events that the
project's tools or MCP servers could provide are reported as information, not
as errors (see `project.unsure`).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["TRUST_ENV", "TRUST_OPTION", "env_trust", "notice", "option_trust"]

TRUST_ENV = "CHAINLANG_LSP_TRUST"
TRUST_OPTION = "trustProject"  # in initializationOptions["chainlang"]

_YES = {"1", "true", "yes", "on"}
_NO = {"", "0", "false", "no", "off"}


def env_trust(environ: dict[str, str] | None = None) -> tuple[bool, str | None]:
    """(trusted by the environment, a problem to log): a value that is neither yes nor no trusts nothing."""
    value = (os.environ if environ is None else environ).get(TRUST_ENV, "").strip().lower()
    if value in _YES:
        return True, None
    if value in _NO:
        return False, None
    return False, f"{TRUST_ENV}={value!r} is not understood: set it to 1 to trust the project (it is not trusted)"


def option_trust(options: Any) -> tuple[bool, str | None]:
    """(trusted by `initializationOptions`, a problem to log)."""
    if not isinstance(options, dict):
        return False, None
    section = options.get("chainlang")
    if section is None:
        return False, None
    if not isinstance(section, dict) or not isinstance(section.get(TRUST_OPTION, False), bool):
        return False, (f'initializationOptions.chainlang must be {{"{TRUST_OPTION}": true}} or false; '
                       f"got {section!r} (the project is not trusted)")
    return section.get(TRUST_OPTION, False), None


def notice(held_back: list[str]) -> str:
    """The one message that says what was not loaded and how to trust the project."""
    return (f"chainlang: this workspace is not trusted, so the project's code is not run: "
            f"{', '.join(held_back)} not loaded. Their events are not checked (reported as information). "
            f'To trust the project, set the initialization option {{"chainlang": {{"{TRUST_OPTION}": true}}}} '
            f"in the editor's settings for chainlang lsp, or start it with {TRUST_ENV}=1.")
