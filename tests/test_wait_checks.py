"""The checks of waiting (LANGUAGE.md §15, checks/waits.py) through `chainlang check`: what is
an error and what a warning (the exit status follows), in a project of several files. The
diagnostics themselves are goldens: tests/chains/err/wait-*.chain.yaml, ask-timeout, and
tests/chains/ok/waits.chain.yaml."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import cli

APPROVE = """\
chain: orders.approve
events:
  approval.given:
    payload:
      type: object
      properties: {order: {type: string}, approved: {type: boolean}}
      required: [order, approved]
      additionalProperties: false
inputs:
  order: {type: string}
steps:
  - wait: {event: approval.given, where: "order == inputs.order"}
    id: approval
outputs:
  approved: "{approval.result.approved}"
"""

SHIP = """\
chain: orders.ship
steps:
  - orders.approve: {order: A-17}
  - user.notify: {message: "approved: {orders.approve.result.approved}"}
"""


def check(project: Path, *paths: str) -> tuple[int, list[dict]]:
    proc = cli(project, "check", "--format", "json", *paths)
    assert proc.stderr == "", proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_a_wait_without_timeout_is_a_warning_only(tmp_path: Path) -> None:
    (tmp_path / "approve.chain.yaml").write_text(APPROVE, encoding="utf-8")
    (tmp_path / "ship.chain.yaml").write_text(SHIP, encoding="utf-8")
    code, diagnostics = check(tmp_path, ".")
    assert code == 0  # a chain that calls one that waits is fine: it waits in the same run
    assert [(d["rule"], d["severity"]) for d in diagnostics] == [("CL069", "warning")]


def test_a_hook_that_calls_a_chain_that_waits_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "approve.chain.yaml").write_text(APPROVE.replace('"order == inputs.order"}',
                                                                 '"order == inputs.order", timeout: 2d}'),
                                                 encoding="utf-8")
    (tmp_path / "ship.chain.yaml").write_text(SHIP, encoding="utf-8")
    (tmp_path / "on-notify.hooks.yaml").write_text(
        "hooks:\n  - trigger: post:tools.now\n    action:\n      - orders.ship\n", encoding="utf-8")
    code, diagnostics = check(tmp_path, ".")
    assert code == 1
    [diag] = diagnostics
    assert diag["rule"] == "CL068" and diag["file"].endswith("on-notify.hooks.yaml")
    assert "the chain orders.ship waits (ship.chain.yaml:3 calls orders.approve)" in diag["message"]
