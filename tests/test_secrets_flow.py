"""The secrets taint rule (LANGUAGE.md §16): a secret that flows into a model prompt or
`user.notify` is a static error (CL066) unless the step says `expose: [NAME]` (CL067 checks
the names); what the checker cannot see is refused at run time, with an error of type
`secret` that names the secret and never shows its value."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import cli_here

TOKEN = "crm-tok-5f1e9c2a77"  # no masking heuristic would spot it: only the run's secrets hide it
NOW = "2026-11-23T10:00:00+00:00"

TOOLS = '''\
import os

from chainlang import event


@event("t.echo", description="Return the value", idempotent=True)
def echo(value: object = None) -> dict:
    return {"value": value}


@event("t.token", description="Read the CRM token from the environment itself", idempotent=True)
def token() -> dict:
    return {"value": "token " + os.environ["CRM_TOKEN"]}
'''

TOML = """\
tools = ["tt.py"]
chains = ["."]

[secrets]
crm_token = {env = "CRM_TOKEN"}
"""
WRITTEN = """\
rules:
  - task: chain
    when: "tell the token"
    answer: {chain: ["t.token", {"user.notify": {"message": "{t.token.result.value}"}}]}
"""
SCRIPTED = '\n[models.heavy]\nprovider = "scripted"\nrules = "answers.yaml"\n'


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "tt.py").write_text(TOOLS, encoding="utf-8")
    (tmp_path / "chainlang.toml").write_text(TOML + SCRIPTED, encoding="utf-8")
    (tmp_path / "answers.yaml").write_text(WRITTEN, encoding="utf-8")
    return tmp_path


def write(project: Path, name: str, text: str) -> str:
    (project / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return name


def check(project: Path, name: str) -> list[dict[str, Any]]:
    proc = cli_here(project, "check", "--format", "json", name)
    assert proc.returncode in (0, 1), proc.stderr
    return [d for d in json.loads(proc.stdout) if d["rule"] in ("CL066", "CL067")]


def only(diags: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(diags) == 1, diags
    return diags[0]


# -- static: each way a secret flows ------------------------------------------------------


def test_a_secret_written_in_the_params_of_user_notify(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - user.notify: {message: "the token is {secrets.crm_token}"}
        """)
    found = only(check(project, name))
    assert (found["rule"], found["severity"], found["line"]) == ("CL066", "error", 2)
    assert found["message"] == ("secrets.crm_token reaches the user (user.notify): secrets.crm_token → "
                                "user.notify's message")
    assert "expose: [crm_token]" in found["hint"]


def test_a_secret_through_a_step_s_result_and_a_loop_to_a_model(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - id: fetch
            t.echo: {value: "Bearer {secrets.crm_token}"}
          - t.echo: {value: "{fetch.result.value}"}
          - foreach: "[t.echo.result]"
            as: row
            steps:
              - agent.think: {thread_id: t, prompt: "look at {row}"}
          - user.notify: {message: "fetch ended {fetch.status}"}
        """)
    found = only(check(project, name))  # the status carries nothing
    assert found["line"] == 8
    assert found["message"] == (
        "secrets.crm_token reaches a model (agent.think): secrets.crm_token → step fetch's result → "
        "step t.echo's result → the items of step 3 → agent.think's prompt")


def test_a_secret_through_a_hook_s_payload(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - t.echo: {value: "{secrets.crm_token}"}
        hooks:
          - id: tell
            trigger: post:t.echo
            action:
              - user.notify: {message: "echoed {value}"}
        """)
    found = only(check(project, name))
    assert found["line"] == 7
    assert "→ the payload of hook tell (post:t.echo) → user.notify's message" in found["message"]


def test_a_secret_through_a_sub_chain_s_input_is_reported_at_the_call(project: Path) -> None:
    write(project, "tell.chain.yaml", """\
        chain: crm.tell
        inputs:
          text: {type: string}
        steps:
          - user.notify: {message: "{inputs.text}"}
        outputs:
          said: "{inputs.text}"
        """)
    name = write(project, "a.chain.yaml", """\
        steps:
          - crm.tell: {text: "{secrets.crm_token}"}
        """)
    found = only(check(project, name))
    assert found["line"] == 2
    assert found["message"] == (
        "secrets.crm_token reaches the user (user.notify) in chain crm.tell: secrets.crm_token → input text "
        "of chain crm.tell → user.notify's message (in tell.chain.yaml, line 5)")
    assert check(project, "tell.chain.yaml") == []  # alone, its input holds no secret
    # the calling step's expose covers the chain it calls; its result still holds the secret
    write(project, "a.chain.yaml", """\
        steps:
          - crm.tell: {text: "{secrets.crm_token}"}
            expose: [crm_token]
          - agent.think: {thread_id: t, prompt: "{crm.tell.result.said}"}
        """)
    found = only(check(project, name))
    assert found["line"] == 4 and "step crm.tell's result → agent.think's prompt" in found["message"]


def test_a_natural_language_decide_is_a_sink_and_an_expression_is_not(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - id: fetch
            t.echo: {value: "{secrets.crm_token}"}
          - t.echo: {value: 1}
            decide: "fetch.status == 'ok'"
          - t.echo: {value: 2}
            decide: "only when the CRM answered something useful"
        """)
    found = only(check(project, name))
    assert found["line"] == 7
    assert found["message"] == ("secrets.crm_token reaches the decide model: secrets.crm_token → step fetch's "
                                "result → the decide model (the context of this step's decide:)")
    assert "if the decide model must receive it" in found["hint"]


def test_expose_silences_the_flow_it_names(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - user.notify: {message: "the new token is {secrets.crm_token}"}
            expose: [crm_token]
          - agent.think:
              thread_id: t
              prompt: "{secrets.crm_token}"
            expose: [secrets.crm_token]
        """)
    proc = cli_here(project, "check", "--format", "json", name)
    assert (proc.returncode, json.loads(proc.stdout)) == (0, []), proc.stdout + proc.stderr


def test_an_unknown_expose_name_is_an_error_with_the_likely_one(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - user.notify: {message: "{secrets.crm_token}"}
            expose: [crm_tokn]
        """)
    found = {d["rule"]: d for d in check(project, name)}
    assert set(found) == {"CL066", "CL067"}
    bad = found["CL067"]
    assert (bad["severity"], bad["line"]) == ("error", 3)
    assert bad["message"] == "expose: crm_tokn is not a declared secret (declared: crm_token)"
    assert bad["hint"] == "did you mean 'crm_token'?"


def test_an_expose_that_no_flow_needs_is_a_warning(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - user.notify: {message: "all is well"}
            expose: [crm_token]
        """)
    found = only(check(project, name))
    assert (found["rule"], found["severity"], found["line"]) == ("CL067", "warning", 3)
    assert "no flow of secrets.crm_token" in found["message"]


def test_expose_must_be_names(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - user.notify: {message: "hi"}
            expose: []
        """)
    proc = cli_here(project, "check", "--format", "json", name)
    [found] = json.loads(proc.stdout)
    assert found["rule"] == "CL011" and "an empty expose lets nothing out" in found["message"]


def test_a_secret_through_a_repeat_s_state_and_next(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - id: fetch
            t.echo: {value: "{secrets.crm_token}"}
          - id: poll
            repeat:
              - agent.think: {thread_id: t, prompt: "page {loop.cursor}, pass {loop.pass}"}
              - user.notify: {message: "counted {loop.n}"}
            max: 3
            state: {cursor: "{fetch.result.value}", n: 0}
        """)
    found = only(check(project, name))  # loop.n and loop.pass carry nothing
    assert (found["rule"], found["line"]) == ("CL066", 6)
    assert found["message"] == (
        "secrets.crm_token reaches a model (agent.think): secrets.crm_token → step fetch's result → loop.cursor "
        "of step poll → agent.think's prompt")
    # next: reads the pass's steps, and what it gives loop.NAME reaches the next pass
    text = """\
        steps:
          - id: poll
            repeat:
              - t.echo: {value: "{secrets.crm_token}"}
              - user.notify: {message: "the last one was {loop.last}"}
            max: 2
            state: {last: ""}
            next: {last: "{t.echo.result.value}"}
        """
    write(project, name, text)
    found = only(check(project, name))
    assert (found["rule"], found["line"]) == ("CL066", 5)
    assert found["message"] == (
        "secrets.crm_token reaches the user (user.notify): secrets.crm_token → step t.echo's result → loop.last "
        "of step poll (next:) → user.notify's message")
    write(project, name, text.replace('{loop.last}"}\n', '{loop.last}"}\n                expose: [crm_token]\n'))
    assert check(project, name) == []


def test_a_secret_through_try_catch_and_switch_blocks(project: Path) -> None:
    text = """\
        steps:
          - id: pick
            try:
              - t.echo: {value: "{secrets.crm_token}"}
            catch:
              - user.notify: {message: "failed: {error.message}"}
          - id: choose
            switch: "{pick.status}"
            cases:
              ok:
                - t.echo: {value: "{pick.result.value}"}
            default:
              - t.echo: {value: none}
          - agent.think: {thread_id: t, prompt: "{choose.result.value}"}
          - foreach: "[pick.result]"
            as: row
            steps:
              - switch: "{pick.status}"
                cases:
                  ok:
                    - user.notify: {message: "{row}"}
        """
    name = write(project, "a.chain.yaml", text)
    found = {d["line"]: d for d in check(project, name)}
    assert sorted(found) == [6, 14, 21] and {d["rule"] for d in found.values()} == {"CL066"}, found
    # a catch's {error} holds what the try steps' errors may
    assert found[6]["message"] == (
        "secrets.crm_token reaches the user (user.notify): secrets.crm_token → step t.echo's result → {error} "
        "in the catch → user.notify's message")
    # a try's result is its last step's; a switch's, the last step's of each case
    assert found[14]["message"] == (
        "secrets.crm_token reaches a model (agent.think): secrets.crm_token → step t.echo's result → step pick's "
        "result → step t.echo's result → step choose's result → agent.think's prompt")
    # a foreach's items reach the steps inside a switch's cases within it
    assert found[21]["message"] == (
        "secrets.crm_token reaches the user (user.notify): secrets.crm_token → step t.echo's result → step pick's "
        "result → the items of step 4 → user.notify's message")
    exposed = []
    for line in text.split("\n"):
        exposed.append(line)
        if "- user.notify" in line or "- agent.think" in line:
            exposed.append(" " * (line.index("-") + 2) + "expose: [crm_token]")
    write(project, name, "\n".join(exposed))
    assert check(project, name) == []


def test_a_secret_that_a_pre_hook_sets_on_a_step(project: Path) -> None:
    text = """\
        steps:
          - user.notify: {message: "hello"}
          - t.echo: {value: 1}
          - agent.think: {thread_id: t, prompt: "{t.echo.result.value}"}
        hooks:
          - id: sign
            trigger: pre:user.notify
            set: {message: "{secrets.crm_token}"}
          - trigger: pre:t.*
            set: {value: "Bearer {secrets.crm_token}"}
        """
    name = write(project, "a.chain.yaml", text)
    found = {d["line"]: d for d in check(project, name)}
    assert sorted(found) == [2, 4] and {d["rule"] for d in found.values()} == {"CL066"}, found
    assert found[2]["message"] == (
        "secrets.crm_token reaches the user (user.notify): secrets.crm_token → set: message of hook sign "
        "(pre:user.notify) → user.notify's message")
    # a value set on a step that is no sink still reaches what reads its result
    assert found[4]["message"] == (
        "secrets.crm_token reaches a model (agent.think): secrets.crm_token → set: value of hook #2 (pre:t.*) → "
        "step t.echo's result → agent.think's prompt")
    write(project, name, text.replace('"hello"}\n', '"hello"}\n            expose: [crm_token]\n')
          .replace('value}"}\n', 'value}"}\n            expose: [crm_token]\n'))
    assert check(project, name) == []


# -- run time: what the checker cannot see ----------------------------------------------------


def run(project: Path, chain: str, code: int) -> Any:
    proc = cli_here(project, "run", chain, "--now", NOW, "--json", "--transcript", "run.jsonl",
               env={"CRM_TOKEN": TOKEN})
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    return proc


def transcript(project: Path) -> list[dict[str, Any]]:
    assert TOKEN not in (project / "run.jsonl").read_text(encoding="utf-8")
    return helpers.records(project, "run.jsonl")


def failed_step(recs: list[dict[str, Any]]) -> dict[str, Any]:
    [failed] = [r for r in recs if r["type"] == "step_finished" and r["status"] == "failed" and
                r["event"] == "user.notify"]
    return failed




def test_a_model_written_chain_that_sends_a_secret_to_user_notify_is_refused(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - agent.chain: {plan: "tell the token"}
        """)
    assert check(project, name) == []
    proc = run(project, name, code=1)
    recs = transcript(project)
    failed = failed_step(recs)
    assert failed["step"] == "1/2"
    assert failed["error"]["type"] == "secret"
    assert failed["error"]["message"] == (
        "step 1/2 (user.notify) would send the value of secrets.crm_token to the user (user.notify); "
        "add expose: [crm_token] to the step if it must, or do not send it")
    assert not [r for r in recs if r["type"] == "notify"]  # nothing reached the user
    assert "secrets.crm_token" in proc.stdout + proc.stderr


def test_a_tool_s_result_holding_a_secret_is_refused_unless_exposed(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - t.token
          - user.notify: {message: "{t.token.result.value}"}
        """)
    run(project, name, code=1)
    assert failed_step(transcript(project))["error"]["type"] == "secret"
    (project / "run.jsonl").unlink()
    write(project, "a.chain.yaml", """\
        steps:
          - t.token
          - user.notify: {message: "{t.token.result.value}"}
            expose: [crm_token]
        """)
    run(project, name, code=0)
    ok = [r for r in transcript(project) if r["type"] == "step_finished" and r["event"] == "user.notify"]
    assert [r["status"] for r in ok] == ["ok"]


def test_the_calling_step_s_expose_covers_the_chain_it_runs(project: Path) -> None:
    write(project, "tell.chain.yaml", """\
        chain: crm.tell
        inputs:
          text: {type: string}
        steps:
          - user.notify: {message: "{inputs.text}"}
        """)
    name = write(project, "a.chain.yaml", """\
        steps:
          - t.token
          - crm.tell: {text: "{t.token.result.value}"}
        """)
    run(project, name, code=1)
    failed = failed_step(transcript(project))
    assert failed["step"] == "2/1" and failed["error"]["type"] == "secret"
    (project / "run.jsonl").unlink()
    write(project, "a.chain.yaml", """\
        steps:
          - t.token
          - crm.tell: {text: "{t.token.result.value}"}
            expose: [crm_token]
        """)
    run(project, name, code=0)


def test_params_that_a_decide_text_would_send_to_the_decide_model_are_refused(project: Path) -> None:
    name = write(project, "a.chain.yaml", """\
        steps:
          - t.token
          - t.echo: {value: "{t.token.result.value}"}
            decide: "only when the token looks fresh"
        """)
    run(project, name, code=1)
    [failed] = [r for r in transcript(project) if r["type"] == "step_finished" and r["status"] == "failed"]
    assert (failed["step"], failed["error"]["type"]) == ("2", "secret")
    assert "to the decide model" in failed["error"]["message"]
