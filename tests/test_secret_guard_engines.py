"""The run-time half of the secrets taint rule (LANGUAGE.md §16) on both engines: a tool
that reads a declared secret from its own environment returns its value, a later
`user.notify` would show it to the user. The checker cannot see that flow (the value comes
from no `{secrets.NAME}`), so the run refuses it: on the embedded engine the run's secret
guard, on Temporal the tool activity on the worker (whose tools read the secrets from the
workers' environment). Both end the same: the step failed with type `secret`, exit 1, the
value nowhere, the same transcript records; with `expose: [crm_token]` both run. The same
for a step of a named chain (a child workflow on Temporal) under a calling step's
`expose`, and for an emit's hook actions (the emit workflow).

A real Temporal dev server on loopback and a `chainlang worker` (tests/temporal_util.py;
skipped, saying why, without the SDK or the CLI)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from chainlang.testing.expect import golden_lines
from tests.helpers import cli, records, show
from tests.temporal_util import Workers, dev_server, temporal_toml

pytestmark = pytest.mark.slow

TOKEN = "crm-tok-8d03b7e1c4"  # no masking heuristic would spot it: only the project's secrets hide it
NOW = "2026-11-27T10:00:00+00:00"
SECRETS = '\n[secrets]\ncrm_token = {env = "CRM_TOKEN"}\n'

TOOLS = '''\
import os

from chainlang import event


@event("crm.token", description="Read the CRM token from this process' environment", idempotent=True)
def token() -> dict:
    return {"value": "token " + os.environ["CRM_TOKEN"]}
'''

TELL = """\
chain: crm.tell
inputs:
  text: {type: string}
steps:
  - user.notify: {message: "{inputs.text}"}
"""

# the chains of the cases, each written twice: as is, and with `expose: [crm_token]` on the step that sends
DIRECT = """\
steps:
  - crm.token
  - user.notify: {message: "{crm.token.result.value}"}
"""
THROUGH_SUBCHAIN = """\
steps:
  - crm.token
  - crm.tell: {text: "{crm.token.result.value}"}
"""
RETRIED = """\
steps:
  - crm.token
  - user.notify: {message: "{crm.token.result.value}"}
    retry: {attempts: 3, delay: 10ms}
"""
# an emit's hook actions (the emit workflow, on Temporal): the same flow, told or exposed
HOOKS = """\
events:
  crm.rotated: {payload: {type: object}}
  crm.shown: {payload: {type: object}}
hooks:
  - id: tell
    trigger: post:crm.rotated
    action:
      - crm.token
      - user.notify: {message: "{crm.token.result.value}"}
  - id: show
    trigger: post:crm.shown
    action:
      - crm.token
      - user.notify: {message: "{crm.token.result.value}"}
        expose: [crm_token]
"""
# name → (chain, the path of the step that sends, its max_attempts)
CASES = {"direct": (DIRECT, "2", 1), "subchain": (THROUGH_SUBCHAIN, "2/1", 1), "retried": (RETRIED, "2", 3)}


def exposed(chain: str) -> str:
    return chain + "    expose: [crm_token]\n"


def make_project(directory: Path, toml: str) -> Path:
    directory.mkdir(parents=True)
    (directory / "tools.py").write_text(TOOLS, encoding="utf-8")
    (directory / "lib").mkdir()
    (directory / "lib" / "tell.chain.yaml").write_text(TELL, encoding="utf-8")
    (directory / "chainlang.toml").write_text(toml + SECRETS, encoding="utf-8")
    (directory / "crm.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    for name, (chain, *_) in CASES.items():
        (directory / f"{name}.chain.yaml").write_text(chain, encoding="utf-8")
        (directory / f"{name}-exposed.chain.yaml").write_text(exposed(chain), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Two copies of one project declaring crm_token: on the embedded engine, and on Temporal
    (with a worker); CRM_TOKEN is set for the CLI and the worker (both inherit this process'
    environment: tests.helpers.clean_env)."""
    base = tmp_path_factory.mktemp("secret-engines")
    with pytest.MonkeyPatch.context() as patch, contextmanager(dev_server)(base / "server.log") as address:
        patch.setenv("CRM_TOKEN", TOKEN)
        embedded = make_project(base / "embedded", 'tools = ["tools.py"]\nchains = ["lib"]\n')
        temporal = make_project(base / "temporal", temporal_toml(address, "secret-guard")
                                .replace('chains = ["."]', 'chains = ["lib"]'))
        workers = Workers(temporal)
        workers.start()
        try:
            yield embedded, temporal
        finally:
            workers.close()


def run_on_both(engines: tuple[Path, Path], name: str, code: int) -> list[tuple[list[dict[str, Any]], str]]:
    """Run `name` on each engine: it ends with `code`, the token shown nowhere, the same
    output (--json) and transcript records on both; each one's records and stderr."""
    outcomes = []
    for project in engines:
        proc = cli(project, "run", f"{name}.chain.yaml", "--now", NOW, "--json", "--transcript", f"{name}.jsonl",
                   timeout=120)
        assert proc.returncode == code, f"{project.name}: {show(proc)}"
        assert TOKEN not in proc.stdout + proc.stderr, f"{project.name}: {show(proc)}"
        assert TOKEN not in (project / f"{name}.jsonl").read_text(encoding="utf-8"), project.name
        result = json.loads(proc.stdout)
        for key in ("run_id", "duration_ms", "transcript"):
            result.pop(key, None)
        outcomes.append((result, records(project, f"{name}.jsonl"), proc.stderr))
    (on_embedded, recs_embedded, _), (on_temporal, recs_temporal, _) = outcomes
    assert on_temporal == on_embedded
    assert sorted(golden_lines(recs_temporal)) == sorted(golden_lines(recs_embedded))
    return [(recs, err) for _, recs, err in outcomes]


def test_the_checker_cannot_see_a_secret_that_a_tool_returns(engines: tuple[Path, Path]) -> None:
    """The point of the run-time refusal: the chains check clean (no CL066) on both engines."""
    for project in engines:
        proc = cli(project, "check", "--format", "json", *(f"{name}.chain.yaml" for name in CASES))
        assert proc.returncode == 0, f"{project.name}: {show(proc)}"
        assert [d for d in json.loads(proc.stdout) if d["severity"] == "error"] == [], proc.stdout


@pytest.mark.parametrize("name", list(CASES))
def test_a_secret_a_tool_returned_is_refused_on_its_way_to_the_user_on_both_engines(
        engines: tuple[Path, Path], name: str) -> None:
    _, path, max_attempts = CASES[name]
    for recs, stderr in run_on_both(engines, name, code=1):
        [end] = [r for r in recs if r["type"] == "run_finished"]
        assert end["status"] == "failed"  # its error: the step's (secret), or the sub-chain's that failed (chain)
        assert "would send the value of secrets.crm_token to the user" in stderr  # named, never shown
        [failed] = [r for r in recs if r["type"] == "step_finished" and r["status"] == "failed"
                    and r["event"] == "user.notify"]
        assert failed["step"] == path and failed["attempt"] == 1
        assert failed["error"] == {"type": "secret", "message": (
            f"step {path} (user.notify) would send the value of secrets.crm_token to the user (user.notify); "
            "add expose: [crm_token] to the step if it must, or do not send it")}
        [started] = [r for r in recs if r["type"] == "step_started" and r["event"] == "user.notify"]
        # one attempt, refused, never retried: the same records on both engines
        assert started["max_attempts"] == max_attempts
        assert not [r for r in recs if r["type"] == "notify"]  # nothing reached the user


@pytest.mark.parametrize("name", list(CASES))
def test_expose_lets_the_secret_through_on_both_engines(engines: tuple[Path, Path], name: str) -> None:
    for recs, _ in run_on_both(engines, f"{name}-exposed", code=0):
        [end] = [r for r in recs if r["type"] == "run_finished"]
        assert end["status"] == "ok"
        notified = [r for r in recs if r["type"] == "step_finished" and r["event"] == "user.notify"]
        assert [r["status"] for r in notified] == ["ok"]


@pytest.mark.parametrize("event", ["crm.rotated", "crm.shown"])
def test_a_hook_action_s_secret_is_refused_unless_exposed_on_both_engines(engines: tuple[Path, Path],
                                                                          event: str) -> None:
    outcomes = []
    for project in engines:
        name = f"emit-{event}.jsonl"
        proc = cli(project, "emit", event, "--data", "{}", "--now", NOW, "--json", "--transcript", name, timeout=120)
        assert TOKEN not in proc.stdout + proc.stderr, f"{project.name}: {show(proc)}"
        assert TOKEN not in (project / name).read_text(encoding="utf-8"), project.name
        result = json.loads(proc.stdout)
        for key in ("run_id", "duration_ms", "transcript"):
            result.pop(key, None)
        for item in result.get("fired", []):
            item.pop("duration_ms", None)
        outcomes.append((proc.returncode, result, sorted(golden_lines(records(project, name)))))
    assert outcomes[1] == outcomes[0]
    told = [json.loads(line) for line in outcomes[0][2]]
    [notify] = [r for r in told if r["type"] == "step_finished" and r["event"] == "user.notify"]
    if event == "crm.rotated":
        assert notify["status"] == "failed" and notify["error"]["type"] == "secret", notify
    else:
        assert notify["status"] == "ok", notify
