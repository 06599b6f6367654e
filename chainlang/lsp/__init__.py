"""`chainlang lsp`: a language server (stdio) for chain and hooks files.

Diagnostics from the real checker as you type, completion of event names,
keys and params, hover help on events and rule codes. Needs pygls (the `lsp`
extra); nothing here is imported by the rest of chainlang. Runs no project code
until the workspace is trusted (chainlang.lsp.trust).
"""

from __future__ import annotations

__all__ = ["serve_stdio"]


def serve_stdio() -> None:
    """Serve one editor over stdin/stdout until it sends exit.

    stdout carries the protocol only: the server writes to a copy of the descriptor,
    and descriptor 1 (and sys.stdout) become stderr, so that a tool module printing
    as it is imported, or a subprocess it starts, cannot corrupt the stream.

    The working directory (the editor's workspace, as a rule) is taken off sys.path:
    started as `python -m chainlang lsp` it is first there, and a `difflib.py` of an
    untrusted repository would then be imported in place of the standard module the
    checker imports later. A trusted project's tools are found from its chainlang.toml's
    directory, as `chainlang check` finds them."""
    import os
    import sys

    from chainlang.lsp.server import build_server

    here = os.path.realpath(os.getcwd())
    sys.path[:] = [entry for entry in sys.path if entry and os.path.realpath(entry) != here]

    sys.stdout.flush()
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    build_server().start_io(sys.stdin.buffer, protocol_out)
