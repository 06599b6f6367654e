"""What the real-model tests share: the model server (tests/llm/serve_model.py in a process of
its own), a loopback proxy in front of it that counts and times every request, the CLI, and
temporary projects.

The proxy is how the tests know whether a run asked the model at all (a resume must not) and
how long each real answer took: it forwards each request to the server as it is and keeps
a `Call` per request.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from tests import helpers
from tests.helpers import records

HERE = Path(__file__).resolve().parent
START_TIMEOUT = 120.0  # seconds for the server to load the model and answer /v1/models
STOP_TIMEOUT = 10.0
CLI_TIMEOUT = 180.0


# -- the model server ------------------------------------------------------------------------


class ModelServer:
    """tests/llm/serve_model.py in its own session: started, waited for (bounded), stopped.

    Its stdin is a pipe this process holds: if the test session dies without stopping it,
    the pipe closes and the server exits by itself."""

    def __init__(self, log_path: Path, threads: int, extra_args: list[str] | None = None) -> None:
        self.log_path = log_path
        self.threads = threads
        self.extra_args = list(extra_args or [])  # more options for serve_model.py (--ctx 2048)
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""  # http://127.0.0.1:PORT (no /v1)
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "serve_model.py"), "--threads", str(self.threads), *self.extra_args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            self.url = self._address(deadline)
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            raise

    def _address(self, deadline: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        box: list[bytes] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(max(0.0, deadline - time.monotonic()))
        line = box[0].decode("utf-8", "replace").strip() if box else ""
        if not line.startswith("LISTENING http://127.0.0.1:"):
            raise RuntimeError(f"the model server did not start ({line or 'no address'}); its log: {self.log_path}\n"
                               + self.log_tail())
        return line.split(" ", 1)[1]

    def _wait_ready(self, deadline: float) -> None:
        """Until GET /v1/models answers 200 (the model is loaded), or the deadline."""
        last = ""
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"the model server exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                status, body = http_get(self.url + "/v1/models", timeout=5.0)
                if status == 200 and json.loads(body).get("data"):
                    return
                last = f"HTTP {status}"
            except OSError as exc:
                last = str(exc)
            time.sleep(0.2)
        raise RuntimeError(f"the model server did not answer /v1/models within {START_TIMEOUT:.0f}s ({last})")

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL after STOP_TIMEOUT; always reaps it."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, STOP_TIMEOUT)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if proc is not None:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text("utf-8", "replace").splitlines()[-lines:])
        except OSError:
            return ""


def http_get(url: str, timeout: float) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
    try:
        conn.request("GET", parts.path or "/")
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# -- the counting proxy ----------------------------------------------------------------------


@dataclass
class Call:
    """One request that went through the proxy."""

    test: str
    method: str
    path: str
    request: Any  # the JSON body, or None
    status: int = 0
    seconds: float = 0.0
    answer: Any = None  # the JSON answer, or None
    client_gone: bool = False  # the client had given up (its timeout) when the answer came
    told: bool = False  # asked with the test's sampling (prompts that have the model copy an answer)

    @property
    def content(self) -> str:
        """The model's text (choices[0].message.content), or ''."""
        try:
            return str(self.answer["choices"][0]["message"]["content"])
        except (TypeError, KeyError, IndexError):
            return ""

    @property
    def kind(self) -> str:
        """What was asked: the name of the answer's schema (decision, chain, next_event...)."""
        try:
            name = str(self.request["response_format"]["json_schema"]["name"])
        except (TypeError, KeyError):
            name = "text"
        return f"{name}, told" if self.told else name

    @property
    def tokens(self) -> tuple[int, int]:
        """(prompt tokens, answer tokens) as the server counted them."""
        usage = (self.answer or {}).get("usage") or {} if isinstance(self.answer, dict) else {}
        return int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))


@dataclass
class Proxy:
    """A loopback HTTP/1.1 proxy to `upstream` that keeps a `Call` per request, lowers a chat
    request's max_tokens to `max_tokens` and adds `sampling` (`Call.request` is what the
    client sent)."""

    upstream: str
    calls: list[Call] = field(default_factory=list)
    test: str = ""
    in_flight: int = 0
    # the longest answer the server may give, whatever the request asks (llama.cpp's own
    # n_predict does not bound a request's max_tokens): a 135M model under a JSON schema can
    # nest objects until its limit, and 1,024 tokens on a busy core take minutes
    max_tokens: int = 256
    # sampling settings for the chat requests that do not set them, as a server's defaults
    # would be (a test that has the model copy a text turns the repeat penalty off)
    sampling: dict[str, Any] = field(default_factory=dict)
    verbose: bool = True  # a line per chat request on stdout
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The base URL a chainlang.toml names (with /v1)."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def chat_calls(self, test: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.path.endswith("/chat/completions") and (test is None or c.test == test)]

    def start(self) -> None:
        proxy = self
        upstream = urlsplit(self.upstream)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as chainlang's pooled client expects

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def _forward(self) -> None:
                with proxy._lock:
                    proxy.in_flight += 1
                try:
                    self._relay()
                finally:
                    with proxy._lock:
                        proxy.in_flight -= 1

            def _client_closed(self) -> bool:
                """The client closed its connection (an end of file waits to be read)."""
                readable, _, _ = select.select([self.connection], [], [], 0)
                try:
                    return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    return True

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    parsed: Any = json.loads(body) if body else None
                except ValueError:
                    parsed = None
                call = Call(proxy.test, self.command, self.path, parsed)
                if self.path.endswith("/chat/completions") and isinstance(parsed, dict):
                    sent = {**proxy.sampling, **parsed}
                    call.told = bool(proxy.sampling)
                    asked = parsed.get("max_tokens")
                    if not isinstance(asked, int) or asked > proxy.max_tokens:
                        sent["max_tokens"] = proxy.max_tokens
                    if sent != parsed:
                        body = json.dumps(sent).encode("utf-8")
                started = time.monotonic()
                conn = http.client.HTTPConnection(upstream.hostname or "127.0.0.1", upstream.port, timeout=600)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection", "content-length")}
                    conn.request(self.command, self.path, body=body or None, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                    call.status = response.status
                    content_type = response.getheader("Content-Type", "application/json")
                finally:
                    conn.close()
                call.seconds = time.monotonic() - started
                try:
                    call.answer = json.loads(data)
                except ValueError:
                    pass
                with proxy._lock:
                    proxy.calls.append(call)
                call.client_gone = self._client_closed()
                try:
                    self.send_response(call.status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError:  # the client gave up (a timeout test)
                    call.client_gone = True
                    self.close_connection = True
                if call.path.endswith("/chat/completions") and proxy.verbose:
                    prompt, answer = call.tokens
                    print(f"\n[model call] {call.test}: {call.seconds:.2f}s, {prompt} prompt + {answer} answer tokens"
                          f"{' (client gone)' if call.client_gone else ''}: {call.content[:200]!r}", flush=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def wait_idle(self, timeout: float = 120.0) -> None:
        """Until no request is in hand (a client that gave up leaves its request running on
        the server): the next test's calls and timings are then its own."""
        deadline = time.monotonic() + timeout
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)


def summary(calls: list[Call]) -> list[str]:
    """Lines for the end of the session: each real answer's time, and min/median/max, in all and
    by kind of request (the name of the schema it asked for: decision, chain...)."""
    chat = [c for c in calls if c.path.endswith("/chat/completions") and c.status == 200 and not c.client_gone]
    if not chat:
        return ["no model answers"]
    lines = [f"{c.test} [{c.kind}]: {c.seconds:.2f}s ({c.tokens[0]} prompt + {c.tokens[1]} answer tokens)"
             for c in chat]

    def stats(label: str, group: list[Call]) -> str:
        times = sorted(c.seconds for c in group)
        answer = sorted(c.tokens[1] for c in group)
        rates = [c.answer.get("timings") or {} for c in group]
        reading = statistics.median(r.get("prompt_per_second", 0.0) for r in rates)
        writing = statistics.median(r.get("predicted_per_second", 0.0) for r in rates)
        return (f"{label}: {len(times)} answers, min {times[0]:.2f}s, median {statistics.median(times):.2f}s, "
                f"max {times[-1]:.2f}s, total {sum(times):.1f}s; answer tokens median {statistics.median(answer):.0f}; "
                f"the server read {reading:.0f} and wrote {writing:.0f} tokens/s (medians)")

    for kind in sorted({c.kind for c in chat}):
        lines.append(stats(kind, [c for c in chat if c.kind == kind]))
    lines.append(stats("all", chat))
    return lines


# -- the CLI and projects --------------------------------------------------------------------


cli = partial(helpers.cli, timeout=CLI_TIMEOUT)  # chainlang in a subprocess; never a traceback


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- projects --------------------------------------------------------------------------------


TOOLS = '''
from typing import Any
from chainlang import event


@event("room.book", description="Book a meeting room for a number of people", idempotent=True)
def book(room: str, people: int) -> dict[str, Any]:
    return {"room": room, "people": people}


@event("note.keep", description="Keep a note about a message", idempotent=True)
def keep(text: str) -> dict[str, Any]:
    return {"kept": text}


@event("wait.pause", description="Wait a while", idempotent=True)
async def pause(ms: int) -> int:
    import asyncio
    await asyncio.sleep(ms / 1000)
    return ms
'''


def write_project(project: Path, toml: str, chain: str) -> Path:
    """A project with the tools above (tools.py), chainlang.toml (`toml` after the tools line)
    and the chain t.chain.yaml, which must check clean."""
    (project / "tools.py").write_text(TOOLS, encoding="utf-8")
    (project / "chainlang.toml").write_text(f'tools = ["tools.py"]\n\n{toml}', encoding="utf-8")
    path = project / "t.chain.yaml"
    path.write_text(chain, encoding="utf-8")
    checked = cli(project, "check", path.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return path


def run(project: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], float]:
    """chainlang run t.chain.yaml with its transcript in run.jsonl: the process, the records, the time."""
    started = time.monotonic()
    proc = cli(project, "run", "t.chain.yaml", "--transcript", "run.jsonl", "--json", "--progress", "plain", *args)
    return proc, records(project / "run.jsonl"), time.monotonic() - started


def the_decision(recs: list[dict[str, Any]], step: str) -> dict[str, Any]:
    """The one `decide` record of `step` (its position, "1", as transcripts name steps)."""
    decisions = [r for r in recs if r["type"] == "decide" and r["step"] == step]
    assert len(decisions) == 1, decisions
    return decisions[0]
