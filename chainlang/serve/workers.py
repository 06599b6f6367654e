"""`chainlang serve --workers N`: N serve processes on one port, under one supervisor.

Python runs one thread of Python at a time, so one serve process uses one core. Several
workers share the port (SO_REUSEPORT: the kernel spreads the connections among them) and
the store, which is built for several processes: leases give each due task to one of
them, an emit's transcript lock tells a live worker's emit from a dead one's, and every
worker may take up what a dead one left. Their metrics live in files of a shared
directory (the Prometheus client's multiprocess mode): any worker's `/metrics` sums them.

The workers take the events; one more worker fires the due tasks (a loop that requests
keep busy would make them late). The supervisor reserves the port, starts the workers one
after the other (each tells it when it is ready), restarts one that dies (at most 5 times a minute, else it stops all),
and passes SIGTERM / SIGINT on to them: each drains as a single serve does.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

from chainlang.errors import UsageError

__all__ = ["supervise"]

_RESTARTS = 5  # at most this many restarts of workers in _WINDOW seconds
_WINDOW = 60.0


def _reserve(host: str, port: int) -> socket.socket:
    """Bind (not listen) the port with SO_REUSEPORT, so that port 0 becomes one port all
    the workers can bind, and no other program takes it meanwhile."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


class _Worker:
    def __init__(self, index: int, command: list[str], env: dict[str, str]) -> None:
        self.index = index
        self.proc = subprocess.Popen(command, env={**env, "CHAINLANG_SERVE_WORKER": str(index)},
                                     stdout=subprocess.PIPE, text=True, encoding="utf-8", errors="replace")
        self.ready = threading.Event()
        self.line = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("serving ") and not self.ready.is_set():
                self.line = line.strip()
                self.ready.set()
            elif line.strip() != "serve stopped":
                sys.stdout.write(line)
                sys.stdout.flush()
        self.ready.set()  # it ended before listening: the supervisor sees its exit code


def supervise(start: Path, host: str, port: int, workers: int, grace: str | None, tools: Sequence[str]) -> int:
    sock = _reserve(host, port)
    port = sock.getsockname()[1]
    shared = tempfile.mkdtemp(prefix="chainlang-serve-metrics-")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": shared}
    command = [sys.executable, "-m", "chainlang.cli", "serve", "--host", host, "--port", str(port)]
    if grace is not None:
        command += ["--grace", grace]
    for tool in tools:
        command += ["--tools", tool]
    # N workers take the events; one more fires the due tasks, with a loop no request keeps busy
    roles = ["http"] * workers + ["tasks"]
    stopping = threading.Event()
    running: list[_Worker] = []

    def stop(signum: int, frame: object) -> None:
        stopping.set()
        for worker in running:
            if worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for index, role in enumerate(roles):
            if stopping.is_set():
                break
            worker = _Worker(index, command + ["--worker", role], env)
            running.append(worker)
            worker.ready.wait()
            if worker.proc.poll() is not None and not worker.line:  # it could not start: say why, stop
                stop(signal.SIGTERM, None)
                _wait(running, 10.0)
                return worker.proc.returncode or 2
        sock.close()
        if not stopping.is_set():
            shown = f"[{host}]" if ":" in host else host
            first = running[0].line.rsplit(" on http", 1)[0] if running else f"serving {start}"
            print(f"{first} on http://{shown}:{port} ({workers} workers and a tasks worker); stop with Ctrl-C or "
                  "SIGTERM", flush=True)
        restarts: list[float] = []
        while not stopping.is_set():
            time.sleep(0.2)
            for i, worker in enumerate(running):
                code = worker.proc.poll()
                if code is None or stopping.is_set():
                    continue
                _forget(shared, worker.proc.pid)
                now = time.monotonic()
                restarts = [t for t in restarts if now - t < _WINDOW] + [now]
                if len(restarts) > _RESTARTS:
                    print(f"serve: worker {worker.index} exited with {code}; too many restarts in a minute, "
                          "stopping", file=sys.stderr, flush=True)
                    stop(signal.SIGTERM, None)
                    _wait(running, 60.0)
                    return 1
                print(f"serve: worker {worker.index} exited with {code}; starting another", file=sys.stderr,
                      flush=True)
                running[i] = _Worker(worker.index, command + ["--worker", roles[worker.index]], env)
        _wait(running, None)
        print("serve stopped", flush=True)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
        for worker in running:
            if worker.proc.poll() is None:
                worker.proc.kill()
        shutil.rmtree(shared, ignore_errors=True)


def _wait(workers: list[_Worker], timeout: float | None) -> None:
    deadline = None if timeout is None else time.monotonic() + timeout
    for worker in workers:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            worker.proc.wait(left)
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait()


def _forget(shared: str, pid: int) -> None:
    """A dead worker's live gauges (what it was running) no longer count."""
    try:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, shared)  # type: ignore[no-untyped-call]
    except Exception:
        pass
