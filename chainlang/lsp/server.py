"""The language server: document events, debounced checks, completion and hover."""

from __future__ import annotations

import asyncio
import os
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from chainlang.lsp.convert import SOURCE, to_lsp
from chainlang.lsp.project import Projects, ProjectView, check_document
from chainlang.pipeline import CHAIN_SUFFIXES, HOOKS_SUFFIXES

DEBOUNCE_SECONDS = 0.25  # typing faster than this checks only the last text


class ChainServer(LanguageServer):
    def __init__(self) -> None:
        from chainlang import __version__

        super().__init__("chainlang", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.projects = Projects()
        self.pending: dict[str, asyncio.Task[None]] = {}
        # one checking thread: checks never overlap, and the loop keeps answering meanwhile
        self.checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chainlang-check")

    def log(self, kind: types.MessageType, message: str) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))


def is_chain_document(uri: str) -> bool:
    name = uri.rsplit("/", 1)[-1].split("?", 1)[0]
    return name.endswith(CHAIN_SUFFIXES) or name.endswith(HOOKS_SUFFIXES)


def document_path(doc: TextDocument) -> str:
    """The file path the checker sees (a document not on disk is checked as if in the working directory)."""
    path = to_fs_path(doc.uri) if doc.uri.startswith("file:") else None
    return path or os.path.join(os.getcwd(), doc.uri.rsplit("/", 1)[-1] or "untitled.chain.yaml")


def schedule(server: ChainServer, uri: str, delay: float = DEBOUNCE_SECONDS) -> None:
    old = server.pending.pop(uri, None)
    if old is not None:
        old.cancel()
    server.pending[uri] = asyncio.get_running_loop().create_task(_check_later(server, uri, delay))


async def _check_later(server: ChainServer, uri: str, delay: float) -> None:
    await asyncio.sleep(delay)
    try:
        doc = server.workspace.get_text_document(uri)
        text, version, path = doc.source, doc.version, document_path(doc)
    except Exception:  # closed meanwhile
        return
    loop = asyncio.get_running_loop()
    from chainlang.pipeline import UsageError

    try:
        found = await loop.run_in_executor(server.checker, check_document, path, text, server.projects)
    except asyncio.CancelledError:
        raise
    except UsageError as exc:  # the project itself is broken (chainlang.toml, a tool): say so at the top
        server.log(types.MessageType.Warning, f"chainlang: {exc}")
        _publish(server, uri, version, [types.Diagnostic(
            range=types.Range(types.Position(0, 0), types.Position(0, 1)), message=f"cannot check: {exc}",
            severity=types.DiagnosticSeverity.Error, source=SOURCE)])
        return
    except Exception as exc:  # a checker bug must not take the server down with it
        server.log(types.MessageType.Error,
                   f"chainlang: internal error checking {path}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        return
    if server.pending.get(uri) is not asyncio.current_task():
        return  # a newer change or a close came in while checking
    server.pending.pop(uri, None)
    current = server.workspace.text_documents.get(uri)
    if current is None:
        return
    lines = text.splitlines(keepends=True)
    _publish(server, uri, version, [to_lsp(d, lines, current.position_codec) for d in found])


def _publish(server: ChainServer, uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))


async def _view(server: ChainServer, doc: TextDocument) -> ProjectView:
    directory = Path(document_path(doc)).parent
    return await asyncio.get_running_loop().run_in_executor(None, server.projects.view, directory)


def build_server() -> ChainServer:
    server = ChainServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ChainServer, params: types.DidOpenTextDocumentParams) -> None:
        if is_chain_document(params.text_document.uri):
            schedule(ls, params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ChainServer, params: types.DidChangeTextDocumentParams) -> None:
        if is_chain_document(params.text_document.uri):
            schedule(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: ChainServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.projects.forget()
        if is_chain_document(params.text_document.uri):
            schedule(ls, params.text_document.uri, 0)
            # a saved hooks file or named chain changes what the other open documents see
            for uri in list(ls.workspace.text_documents):
                if uri != params.text_document.uri and is_chain_document(uri):
                    schedule(ls, uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ChainServer, params: types.DidCloseTextDocumentParams) -> None:
        task = ls.pending.pop(params.text_document.uri, None)
        if task is not None:
            task.cancel()
        _publish(ls, params.text_document.uri, None, [])

    @server.feature(types.TEXT_DOCUMENT_COMPLETION,
                    types.CompletionOptions(trigger_characters=[".", ":", " ", "{", ","]))
    async def completion(ls: ChainServer, params: types.CompletionParams) -> types.CompletionList | None:
        from chainlang.lsp.completion import complete
        from chainlang.lsp.context import cursor_context

        uri = params.text_document.uri
        if not is_chain_document(uri):
            return None
        try:
            doc = ls.workspace.get_text_document(uri)
            here = doc.position_from_client_units(params.position)
            cursor = cursor_context(doc.lines, here.line, here.character)
            if not cursor.kind:
                return None
            view = await _view(ls, doc)
            hooks_file = uri.endswith(HOOKS_SUFFIXES)
            items = complete(cursor, view.with_chains, hooks_file, params.position)
        except Exception as exc:
            ls.log(types.MessageType.Error, f"chainlang: completion failed: {type(exc).__name__}: {exc}")
            return None
        return types.CompletionList(is_incomplete=False, items=items)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: ChainServer, params: types.HoverParams) -> types.Hover | None:
        from chainlang.lsp.hover import hover_markdown, word_at

        uri = params.text_document.uri
        if not is_chain_document(uri):
            return None
        try:
            doc = ls.workspace.get_text_document(uri)
            here = doc.position_from_client_units(params.position)
            if here.line >= len(doc.lines):
                return None
            found = word_at(doc.lines[here.line], here.character)
            if found is None:
                return None
            view = await _view(ls, doc)
            text = hover_markdown(found[0], view.with_chains)
        except Exception as exc:
            ls.log(types.MessageType.Error, f"chainlang: hover failed: {type(exc).__name__}: {exc}")
            return None
        if text is None:
            return None
        word, start, end = found
        rng = doc.range_to_client_units(_server_range(here.line, start, end))
        return types.Hover(contents=types.MarkupContent(types.MarkupKind.Markdown, text), range=rng)

    return server


def _server_range(line: int, start: int, end: int) -> ServerTextRange:
    return ServerTextRange(ServerTextPosition(line, start), ServerTextPosition(line, end))
