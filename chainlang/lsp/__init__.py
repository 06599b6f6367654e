"""`chainlang lsp`: a language server (stdio) for chain and hooks files.

Diagnostics from the real checker as you type, completion of event names,
keys and params, hover help on events and rule codes. Needs pygls (the `lsp`
extra); nothing here is imported by the rest of chainlang.
"""

from __future__ import annotations

__all__ = ["serve_stdio"]


def serve_stdio() -> None:
    """Serve one editor over stdin/stdout until it sends exit."""
    from chainlang.lsp.server import build_server

    build_server().start_io()
