"""`chainlang lsp`: a language server (stdio) for chain and hooks files.

Diagnostics from the real checker as you type, completion of event names,
keys and params, hover help on events and rule codes. Needs pygls (the `lsp`
extra); nothing here is imported by the rest of chainlang.
"""

from __future__ import annotations

__all__ = ["serve_stdio"]


def serve_stdio() -> None:
    """Serve one editor over stdin/stdout until it sends exit.

    stdout carries the protocol only: the server writes to a copy of the descriptor,
    and descriptor 1 (and sys.stdout) become stderr, so that a tool module printing
    as it is imported, or a subprocess it starts, cannot corrupt the stream."""
    import os
    import sys

    from chainlang.lsp.server import build_server

    sys.stdout.flush()
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    build_server().start_io(sys.stdin.buffer, protocol_out)
