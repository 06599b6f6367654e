"""One chain or hooks file, read, loaded and modelled: `load_file(path)` → `LoadedFile`.

The first stage of every consumer of chain files (the check pipeline, the checks that read
a called chain's file, stored hooks, the run): it sits below the checks, so a check that
needs another file loads it without importing the pipeline that runs the checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from chainlang.diagnostics import DiagnosticSink
from chainlang.errors import UsageError
from chainlang.load.gc_pause import gc_paused
from chainlang.load.source import SourceFile

if TYPE_CHECKING:
    from chainlang.model.nodes import Chain

__all__ = ["CHAIN_SUFFIXES", "HOOKS_SUFFIXES", "LoadedFile", "file_kind", "is_chain_file", "load_file", "read_bounded"]

CHAIN_SUFFIXES = (".chain.yaml", ".chain.yml")
HOOKS_SUFFIXES = (".hooks.yaml", ".hooks.yml")


@dataclass
class LoadedFile:
    """A chain or hooks file read and built: its source, its diagnostics and its model."""
    path: str
    source: SourceFile
    sink: DiagnosticSink
    chain: "Chain"


def file_kind(path: str) -> str:
    return "hooks" if path.endswith(HOOKS_SUFFIXES) else "chain"


def is_chain_file(name: str) -> bool:
    return name.endswith(CHAIN_SUFFIXES) or name.endswith(HOOKS_SUFFIXES)


@gc_paused()  # see load/gc_pause.py: checking is linear in the file's size this way
def load_file(path: str, data: bytes | None = None, text: str | None = None, kind: str | None = None) -> LoadedFile:
    """The file at `path` (or its `data` / `text` when given) as a model, its problems in
    the file's sink. Raises UsageError only when the file cannot be read."""
    from chainlang.diagnostics.suggest import suggestion_budget
    from chainlang.load.loader import load_bytes, load_text
    from chainlang.model.build import build_chain

    sink = DiagnosticSink(path)
    if text is not None:
        loaded = load_text(path, text, sink)
    else:
        if data is None:
            data = read_bounded(path)
        loaded = load_bytes(path, data, sink)
    with suggestion_budget():
        chain = build_chain(loaded.root, loaded.source, sink, kind=kind or file_kind(path))
    return LoadedFile(path, loaded.source, sink, chain)


def read_bounded(path: str) -> bytes:
    """The file's bytes, reading at most one byte past the size limit (the loader reports it)."""
    from chainlang.load.loader import MAX_FILE_CHARS

    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_FILE_CHARS + 1)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
