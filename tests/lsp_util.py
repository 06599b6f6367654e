"""A minimal LSP client for the tests: JSON-RPC over the stdio of a real
`python -m chainlang lsp` process, with Content-Length framing, as an editor drives it."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TIMEOUT = 10.0  # a broken server fails the test instead of hanging it


class Client:
    """A minimal LSP client: requests wait for their response, notifications are kept in order."""

    def __init__(self, cwd: Path, docs_url: str | None = None, argv: list[str] | None = None,
                 env: dict[str, str] | None = None, timeout: float = TIMEOUT) -> None:
        self.timeout = timeout  # how long a wait for the server may take before the test fails
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        env.pop("CHAINLANG_DOCS_URL", None)
        if docs_url is not None:
            env["CHAINLANG_DOCS_URL"] = docs_url
        env.setdefault("CHAINLANG_LSP_TRUST", "0")  # an editor's environment does not trust the project
        self.proc = subprocess.Popen(argv or [sys.executable, "-m", "chainlang", "lsp"], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.notes: list[dict[str, Any]] = []
        self.garbage: list[bytes] = []  # stdout lines that are not LSP framing
        self.stderr: list[str] = []  # read as it comes, so that a talkative server never blocks on a full pipe
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def wait_stderr(self, text: str) -> str:
        """The first stderr line containing `text` (waits for it)."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for line in list(self.stderr):
                if text in line:
                    return line
            time.sleep(0.02)
        raise AssertionError(f"no stderr line with {text!r} within {self.timeout}s: {''.join(self.stderr)[-2000:]}")

    def write(self, raw: bytes) -> None:
        """Bytes to the server's stdin as they are (framing included, or broken)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, colon, value = line.decode("ascii", "replace").partition(":")
                if not colon or name.lower() not in ("content-length", "content-type"):
                    self.garbage.append(line)  # an editor would drop the connection here
                elif name.lower() == "content-length":
                    length = int(value)
            assert length is not None
            self.messages.put(json.loads(out.read(length)))

    def send_raw(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        ident = self.next_id
        self.send({"id": ident, "method": method, "params": params})
        return self.response(ident, f"response to {method}")

    def response(self, ident: int, what: str = "response") -> Any:
        """The result of the request `ident` (sent already), waiting for it."""
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self._get(deadline, what)
            if msg.get("id") == ident and "method" not in msg:
                assert "error" not in msg, msg
                return msg.get("result")
            self._keep(msg)

    def _keep(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:  # a request from the server (e.g. registerCapability): accept it
            self.send({"id": msg["id"], "result": None})
        else:
            self.notes.append(msg)

    def _get(self, deadline: float, what: str) -> dict[str, Any]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {what} within {self.timeout}s")
        try:
            return self.messages.get(timeout=left)
        except queue.Empty:
            raise AssertionError(f"no {what} within {self.timeout}s") from None

    def wait_note(self, method: str, match: Callable[[dict[str, Any]], bool] = lambda p: True) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, note in enumerate(self.notes):
                if note.get("method") == method and match(note["params"]):
                    del self.notes[: i + 1]
                    return note["params"]
            self._keep(self._get(deadline, method))

    def diagnostics(self, uri: str, version: int | None = None) -> list[dict[str, Any]]:
        params = self.wait_note("textDocument/publishDiagnostics",
                                lambda p: p["uri"] == uri and (version is None or p.get("version") == version))
        return list(params["diagnostics"])

    def open(self, path: Path, text: str, version: int = 1) -> str:
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": version, "text": text}})
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"text": text}]})

    def complete(self, uri: str, line: int, character: int) -> list[str]:
        result = self.request("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}})
        items = result["items"] if isinstance(result, dict) else (result or [])
        return [item["label"] for item in items]

    def close(self) -> int:
        self.request("shutdown", None)
        self.notify("exit", {})
        try:
            return self.proc.wait(timeout=self.timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def started(cwd: Path, options: Any = None, env: dict[str, str] | None = None, timeout: float = TIMEOUT) -> Client:
    """A server past `initialize` (with `options` as its initializationOptions)."""
    c = Client(cwd, env=env, timeout=timeout)
    params = {"processId": os.getpid(), "rootUri": cwd.as_uri(), "capabilities": {}}
    if options is not None:
        params["initializationOptions"] = options
    result = c.request("initialize", params)
    assert result["capabilities"]["completionProvider"]
    assert result["capabilities"]["hoverProvider"]
    c.notify("initialized", {})
    return c


def finish(c: Client) -> None:
    assert not c.garbage, f"the server wrote non-protocol output to stdout: {c.garbage[:3]}"
    if c.proc.poll() is None:
        c.proc.kill()
        c.proc.wait(timeout=TIMEOUT)


TRUSTED = {"chainlang": {"trustProject": True}}
