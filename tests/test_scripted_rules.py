"""The scripted provider's rules for conversations that grow (issue 25): `when` searches the
whole request (the thread's history included), `last` only the last user message, `not`
keeps a rule off a request that contains a text. A two-turn conversation on one thread
shows why: the first turn's words are in the second turn's request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from chainlang.errors import ConfigError
from chainlang.llm.client import ModelBadAnswer
from chainlang.llm.scripted import ScriptedProvider
from chainlang.llm.tiers import ModelRequest, Tier
from tests.helpers import cli

RULES = """\
rules:
  - task: think
    last: groceries
    answer: {event: agent.reply, params: {message: "Reminder set for 17:00."}}
  - task: think
    last: schedule
    not: groceries
    answer: {event: agent.reply, params: {message: "Three meetings today."}}
"""


def ask(provider: ScriptedProvider, task: str, *messages: tuple[str, str]) -> str:
    tier = Tier("heavy", provider, "scripted", 100, 5.0)
    request = ModelRequest(task, [{"role": role, "content": text} for role, text in messages])
    return asyncio.run(provider.complete(tier, request)).text


def provider(tmp_path: Path, text: str) -> ScriptedProvider:
    path = tmp_path / "answers.yaml"
    path.write_text(text, encoding="utf-8")
    return ScriptedProvider.load(path)


def test_last_reads_only_the_last_user_message_and_not_keeps_a_rule_off(tmp_path: Path) -> None:
    rules = provider(tmp_path, RULES)
    first = ask(rules, "think", ("system", "You plan."), ("user", "What is on my schedule today?"))
    assert json.loads(first)["params"]["message"] == "Three meetings today."
    # the history holds "schedule" too: `when: schedule` would answer this turn the same way
    second = ask(rules, "think", ("system", "You plan."), ("user", "What is on my schedule today?"),
                 ("assistant", first), ("user", "Also remind me to buy GROCERIES"))
    assert json.loads(second)["params"]["message"] == "Reminder set for 17:00."


def test_not_refuses_the_rule_whose_text_is_anywhere_in_the_request(tmp_path: Path) -> None:
    rules = provider(tmp_path, "rules:\n  - {task: any, when: calendar, not: [secret, private], answer: ok}\n")
    assert ask(rules, "chain", ("user", "check the calendar")) == "ok"
    with pytest.raises(ModelBadAnswer, match="has no rule for this chain request"):
        ask(rules, "chain", ("system", "private notes"), ("user", "check the calendar"))


@pytest.mark.parametrize("text, message", [
    ("rules:\n  - {task: think, last: 3, answer: x}\n", "last is a text, or a list of texts, the last user message must contain"),
    ("rules:\n  - {task: think, not: [''], answer: x}\n", "not is a text, or a list of texts, the request must not contain"),
])
def test_bad_last_or_not_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        provider(tmp_path, text)


def test_a_two_turn_conversation_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "chainlang.toml").write_text('[models.heavy]\nprovider = "scripted"\nrules = "answers.yaml"\n',
                                             encoding="utf-8")
    (tmp_path / "answers.yaml").write_text(RULES, encoding="utf-8")
    (tmp_path / "turn.chain.yaml").write_text(
        "inputs:\n  thread_id: {type: string}\n  message: {type: string}\n"
        "steps:\n  - thread.match: {message: '{inputs.message}', thread_id: '{inputs.thread_id}'}\n"
        "  - agent.think: {thread_id: '{inputs.thread_id}'}\n"
        "outputs:\n  reply: '{agent.think.result.params.message}'\n", encoding="utf-8")
    assert cli(tmp_path, "threads", "create", "day").returncode == 0
    replies = []
    for message in ("What is on my schedule today?", "And my schedule: remind me about groceries"):
        proc = cli(tmp_path, "run", "turn.chain.yaml", "--json", "--input", "thread_id=day", "--input",
                   f"message={message}")
        assert proc.returncode == 0, proc.stderr
        replies.append(json.loads(proc.stdout)["reply"])
    assert replies == ["Three meetings today.", "Reminder set for 17:00."]
