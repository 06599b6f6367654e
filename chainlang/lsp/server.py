"""The language server: document events, debounced checks, completion and hover.

It reads stdin through chainlang.lsp.framing (a bad or huge frame is logged and
skipped, never fatal), and runs no project code until the workspace is trusted
(chainlang.lsp.trust): until then the first document it reports on carries one
notice saying what was not loaded and how to trust the project.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from chainlang.lsp.convert import SOURCE, to_lsp
from chainlang.lsp.project import Projects, ProjectView, check_document, unsure
from chainlang.lsp.trust import env_trust, notice, option_trust
from chainlang.pipeline import CHAIN_SUFFIXES, HOOKS_SUFFIXES

DEBOUNCE_SECONDS = 0.25  # typing faster than this checks only the last text


class ChainServer(LanguageServer):
    def __init__(self) -> None:
        from chainlang.version import __version__

        super().__init__("chainlang", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        trusted, self.trust_problem = env_trust()
        self.projects = Projects(trusted)
        self.pending: dict[str, asyncio.Task[None]] = {}
        # one checking thread: checks never overlap, and the loop keeps answering meanwhile
        self.checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chainlang-check")
        self.notice_uri: str | None = None  # the document that carries the untrusted-workspace notice
        self.notice_logged = False

    def log(self, kind: types.MessageType, message: str) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def start_io(self, stdin: "BinaryIO | None" = None, stdout: "BinaryIO | None" = None) -> None:
        """pygls' own stdio loop, reading stdin through CheckedFrames: a frame with a bad
        or missing Content-Length, or one over the size limit, is logged to stderr and
        skipped, and the server goes on answering (pygls alone stops reading for good)."""
        from pygls.io_ import StdoutWriter, run_async

        from chainlang.lsp.framing import CheckedFrames

        self._stop_event = threading.Event()  # what pygls' shutdown() sets to end the loop
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        reader = CheckedFrames(stdin or sys.stdin.buffer, self.thread_pool)
        try:
            asyncio.run(run_async(stop_event=self._stop_event, reader=reader, protocol=self.protocol,
                                  logger=logging.getLogger("pygls.server"), error_handler=self.report_server_error))
        except BrokenPipeError:
            print("chainlang lsp: error: the editor closed the connection", file=sys.stderr, flush=True)
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()  # type: ignore[no-untyped-call]  # pygls leaves it unannotated


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
    from chainlang.errors import UsageError

    try:
        found, view = await loop.run_in_executor(server.checker, check_document, path, text, server.projects)
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
    diagnostics = [to_lsp(d, lines, current.position_codec, unsure=unsure(d, view, lines), secrets=view.secrets)
                   for d in found]
    if view.held_back and server.notice_uri in (None, uri):
        server.notice_uri = uri
        diagnostics.insert(0, _trust_notice(server, view))
    _publish(server, uri, version, diagnostics)


def _trust_notice(server: ChainServer, view: ProjectView) -> types.Diagnostic:
    """The one diagnostic, on the first line, that says the project's code was not run."""
    message = notice(view.held_back)
    if not server.notice_logged:
        server.notice_logged = True
        server.log(types.MessageType.Info, message)
    return types.Diagnostic(range=types.Range(types.Position(0, 0), types.Position(0, 1)), message=message,
                            severity=types.DiagnosticSeverity.Information, code="untrusted", source=SOURCE)


def _publish(server: ChainServer, uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version))


async def _view(server: ChainServer, doc: TextDocument) -> ProjectView:
    directory = Path(document_path(doc)).parent
    return await asyncio.get_running_loop().run_in_executor(None, server.projects.view, directory)


def build_server() -> ChainServer:
    server = ChainServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: ChainServer, params: types.InitializeParams) -> None:
        trusted, option_problem = option_trust(params.initialization_options)
        for problem in (ls.trust_problem, option_problem):
            if problem:
                ls.log(types.MessageType.Warning, f"chainlang: {problem}")
        if trusted:
            ls.projects.trusted = True

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
        if ls.notice_uri == params.text_document.uri:
            ls.notice_uri = None  # the next document reported on carries the notice
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
