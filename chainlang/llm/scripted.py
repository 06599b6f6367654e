"""The `scripted` provider: a model tier that answers from a file of rules, for offline
demos and tests (LANGUAGE.md §13).

```yaml
rules:
  - task: think                  # think, chain, repair, decide, summarize... or any (the default)
    when: "schedule today"       # text the request must contain (case-insensitive); a list: all of them
    last: "good morning"         # text the LAST user message must contain (not the thread's history)
    not: "groceries"             # text the request must NOT contain; a list: none of them
    answer: {event: agent.chain, params: {plan: "1. Get today's date ..."}}
  - task: chain
    when: ["Get today's date"]
    answers:                     # one answer per use of the rule, the last one repeated
      - {chain: [...]}
      - {chain: [...]}
```

Rules are tried in order; the first that matches answers. `when` searches the whole request
(system prompt, data, history); `last` only what the user said last (the thread's latest
`user.input` for the requests about a conversation, else the last user message), which is
what a multi-turn test means (a thread's history grows, and a `when` written for one turn would
also answer a later one); `not` keeps a rule from answering a request that contains a text. A mapping or list is answered as
its JSON text, a string as it is. No rule matching is an error that names the task and the
start of the request, so a demo that drifts from its script says so. The file is read with
the safe YAML loader (no tags), at most `MAX_RULES_BYTES`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.llm.client import ModelBadAnswer

if TYPE_CHECKING:
    from chainlang.llm.tiers import ModelAnswer, ModelRequest, Tier

__all__ = ["MAX_RULES_BYTES", "Rule", "ScriptedProvider"]

MAX_RULES_BYTES = 1024 * 1024
_RULE_KEYS = frozenset({"task", "when", "last", "not", "answer", "answers"})


@dataclass
class Rule:
    """One rule of a scripted model: the task and words it answers, and the answers it gives in turn."""
    task: str
    when: tuple[str, ...]
    answers: list[str]
    last: tuple[str, ...] = ()
    without: tuple[str, ...] = ()  # `not:`
    used: int = 0

    def matches(self, task: str, text: str, last: str) -> bool:
        """`text` and `last` (the last user message) are case-folded."""
        return (self.task in ("any", task) and all(part in text for part in self.when)
                and all(part in last for part in self.last) and not any(part in text for part in self.without))

    def next_answer(self) -> str:
        answer = self.answers[min(self.used, len(self.answers) - 1)]
        self.used += 1
        return answer


class ScriptedProvider:
    """Answers from `rules` (see the module's documentation)."""

    def __init__(self, rules: list[Rule], shown: str = "the rules file") -> None:
        self.rules = rules
        self.shown = shown

    @classmethod
    def load(cls, path: Path, shown: str | None = None) -> "ScriptedProvider":
        """The rules of the file at `path`. Raises ConfigError naming the file and the rule."""
        from chainlang.errors import ConfigError

        shown = shown or str(path)
        where = f"the scripted model's rules ({shown})"
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_RULES_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"{where}: cannot read: {exc.strerror or exc}") from None
        if len(data) > MAX_RULES_BYTES:
            raise ConfigError(f"{where}: larger than {MAX_RULES_BYTES // 1024} KiB")
        document = _safe_yaml(data, where)
        rules = document.get("rules") if isinstance(document, dict) else None
        if not isinstance(rules, list) or not rules:
            raise ConfigError(f"{where}: expected a mapping with `rules:`, a list of rules")
        return cls([_rule(raw, f"{where}, rule {n}") for n, raw in enumerate(rules, 1)], shown)

    async def complete(self, tier: "Tier", request: "ModelRequest") -> "ModelAnswer":
        from chainlang.llm.tiers import ModelAnswer, estimate_tokens

        text = request.text()
        said = request.last_input if request.last_input is not None else _last_user(request)
        folded, last = text.casefold(), said.casefold()
        for rule in self.rules:
            if rule.matches(request.task, folded, last):
                answer = rule.next_answer()
                return ModelAnswer(answer, {"prompt_tokens": estimate_tokens(text),
                                            "completion_tokens": estimate_tokens(answer)})
        start = " ".join(_last_user(request).split())[:160]
        raise ModelBadAnswer(f"the scripted {tier.name} model ({self.shown}) has no rule for this {request.task} "
                             f"request; it starts: {start!r}")

    async def aclose(self) -> None:
        return None


def _last_user(request: "ModelRequest") -> str:
    for message in reversed(request.messages):
        if message.get("role") == "user":
            return message.get("content", "")
    return request.text()


def _rule(raw: Any, where: str) -> Rule:
    from chainlang.errors import ConfigError

    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a rule is a mapping with task, when and answer")
    unknown = sorted(set(raw) - _RULE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (a rule has task, when, last, not, answer or answers)")
    task = raw.get("task", "any")
    if not isinstance(task, str) or not task:
        raise ConfigError(f"{where}: task is a name (think, chain, repair, decide...) or any")
    texts_of = {}
    for key, what in (("when", "the request must contain"), ("last", "the last user message must contain"),
                      ("not", "the request must not contain")):
        value = raw.get(key, [])
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(w, str) and w for w in value):
            raise ConfigError(f"{where}: {key} is a text, or a list of texts, {what}")
        texts_of[key] = tuple(w.casefold() for w in value)
    if ("answer" in raw) == ("answers" in raw):
        raise ConfigError(f"{where}: give answer (one) or answers (a list, one per use)")
    answers = [raw["answer"]] if "answer" in raw else raw["answers"]
    if not isinstance(answers, list) or not answers:
        raise ConfigError(f"{where}: answers is a non-empty list")
    # default=str: an unquoted date in YAML (from: 2026-11-23) is a date object, written as its text
    texts = [a if isinstance(a, str) else json.dumps(a, ensure_ascii=False, default=str) for a in answers]
    return Rule(task, texts_of["when"], texts, last=texts_of["last"], without=texts_of["not"])


def _safe_yaml(data: bytes, where: str) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from chainlang.errors import ConfigError

    try:
        return YAML(typ="safe", pure=True).load(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ConfigError(f"{where}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
