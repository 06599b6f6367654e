"""Helpers for the end-to-end tests of `chainlang serve` (tests/test_serve.py): start a real
serve on loopback in a project's directory, talk to it over HTTP, stop it.

`Servers` starts `chainlang serve --port 0 ARGS` as a subprocess, reads the URL from its
first stdout line (`serving ROOT on http://HOST:PORT (...)`), waits until `/healthz`
answers, and kills whatever is still running when it is closed (a test's teardown), so
no serve outlives its test, whatever happened. Its output is read by threads as it comes
(a full pipe must never block serve), and `Server.stop()` sends SIGTERM and returns the
exit code and everything it printed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Sequence

import httpx
import pytest

from tests.helpers import clean_env, cli, command, show

START = 30.0  # seconds for a serve to listen and answer /healthz
STOP = 30.0  # seconds for a serve to end after SIGTERM (beyond its grace period)
_URL = re.compile(r"^serving (?P<root>.+) on (?P<url>http://\S+) \(")


env_with = clean_env  # the tests' clean environment, with `extra` variables set (None: removed)


def run(cwd: Path, *args: str | os.PathLike[str], env: dict[str, str] | None = None,
        timeout: float = 60) -> "subprocess.CompletedProcess[str]":
    """`chainlang ARGS` in `cwd` with `env` (default: the clean one); fails the test when it
    has not ended within `timeout` s. Its output is the test's to judge (`traceback_ok`)."""
    return cli(cwd, *args, env=env or clean_env(), timeout=timeout, traceback_ok=True)


def run_many(*calls: tuple[Path, Sequence[str | os.PathLike[str]], dict[str, str] | None],
             timeout: float = 60) -> list["subprocess.CompletedProcess[str]"]:
    """Independent commands at the same time, (cwd, args, env) each; the results in order."""
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(lambda call: run(call[0], *call[1], env=call[2], timeout=timeout), calls))


class Server:
    """One running `chainlang serve`."""

    def __init__(self, project: Path, args: tuple[str, ...], env: dict[str, str], token: str | None,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        self.project = project
        self.args = args
        self.token = token
        self._out: list[str] = []
        self._err: list[str] = []
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(command("serve", "--port", "0", *args), cwd=project, env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, encoding="utf-8", errors="replace", start_new_session=True,
                                     preexec_fn=preexec_fn)
        self._readers = [threading.Thread(target=self._pump, args=(stream, into), daemon=True)
                         for stream, into in ((self.proc.stdout, self._out), (self.proc.stderr, self._err))]
        for reader in self._readers:
            reader.start()
        self.url = ""
        self.client: httpx.Client | None = None
        self.signalled = False

    def _pump(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            with self._lock:
                into.append(line)

    @property
    def stdout(self) -> str:
        with self._lock:
            return "".join(self._out)

    @property
    def stderr(self) -> str:
        with self._lock:
            return "".join(self._err)

    def describe(self) -> str:
        code = self.proc.poll()
        return (f"chainlang serve {' '.join(self.args)} in {self.project}: "
                f"{'running' if code is None else f'exit code {code}'}\n"
                f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START
        while not self._out:
            if self.proc.poll() is not None:
                self.proc.wait()
                for reader in self._readers:
                    reader.join(5)
                pytest.fail("serve ended before it listened\n" + self.describe())
            if time.monotonic() > deadline:
                pytest.fail(f"serve did not listen within {START} s\n" + self.describe())
            time.sleep(0.01)
        found = _URL.match(self._out[0])
        assert found, "the first line of serve is not 'serving ROOT on URL (...)'\n" + self.describe()
        url = found.group("url")
        # a serve bound to every address is reached on loopback
        self.url = url.replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//[::1]:")
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=httpx.Timeout(60.0, connect=5.0))
        while True:
            try:
                if self.client.get("/healthz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("serve never answered /healthz with 200\n" + self.describe())
            time.sleep(0.02)

    # -- HTTP

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        assert self.client is not None
        return self.client.get(path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        assert self.client is not None
        return self.client.post(path, **kwargs)

    def event(self, name: str, data: Any, key: str | None = None, wait: bool = False) -> httpx.Response:
        """POST /events/NAME with `data` as JSON (and the Idempotency-Key `key`)."""
        headers = {"Idempotency-Key": key} if key is not None else {}
        return self.post(f"/events/{name}" + ("?wait=1" if wait else ""), json=data, headers=headers)

    def run_info(self, run_id: str, until: Callable[[dict[str, Any]], bool] = lambda _b: True,
                 within: float = 10.0) -> dict[str, Any]:
        """GET /runs/RUN_ID until `until(body)` holds (the body of a 200); fails after `within` s."""
        deadline = time.monotonic() + within
        while True:
            reply = self.get(f"/runs/{run_id}")
            if reply.status_code == 200 and until(body := reply.json()):
                return dict(body)
            if time.monotonic() > deadline:
                pytest.fail(f"/runs/{run_id} never reached what the test waits for: {reply.status_code} "
                            f"{reply.text}\n" + self.describe())
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc.poll() is None

    # -- stopping

    def send(self, sig: int = signal.SIGTERM) -> None:
        """Send `sig` now and go on (`stop()` then waits for the end without sending another)."""
        self.proc.send_signal(sig)
        self.signalled = True

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP) -> int:
        """Send `sig` (SIGTERM: a graceful stop; none if `send()` sent one) and wait for
        the end; the exit code."""
        if self.proc.poll() is None and not self.signalled:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"serve did not stop within {timeout} s of signal {sig}\n" + self.describe())
        for reader in self._readers:
            reader.join(5)
        self.close_client()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # serve and anything a tool started
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.close_client()

    def close_client(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


class Servers:
    """The serves a test (or a module) starts; all are killed on `close()`."""

    def __init__(self) -> None:
        self.started: list[Server] = []

    def start(self, project: Path, *args: str, env: dict[str, str] | None = None,
              token: str | None = None, preexec_fn: Callable[[], None] | None = None) -> Server:
        """`chainlang serve --port 0 ARGS` in `project`, once it answers /healthz (with
        `token` as its bearer token; `preexec_fn` runs in the child before serve, e.g. to
        lower a resource limit)."""
        server = Server(project, args, env or clean_env(), token, preexec_fn)
        self.started.append(server)
        server.wait_ready()
        return server

    def close(self) -> None:
        for server in self.started:
            server.kill()

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def servers() -> Iterator[Servers]:
    with Servers() as started:
        yield started


def wait_until(what: str, ready: Callable[[], bool], within: float = 10.0, server: Server | None = None) -> None:
    """Poll `ready()` every 20 ms; fail the test when it does not hold within `within` s."""
    deadline = time.monotonic() + within
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"never reached within {within} s: {what}" + ("\n" + server.describe() if server else ""))
        time.sleep(0.02)


__all__ = ["Server", "Servers", "env_with", "run", "run_many", "servers", "show", "wait_until"]
