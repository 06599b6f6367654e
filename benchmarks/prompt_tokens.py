"""How many tokens the agents' prompts take (issue 25, "prompts that fit"): not a test, it
prints figures and marks the target PASS or MISS for information.

For two projects, the requests are built as the runtime builds them, from the project's real
registry (`chainlang.runtime.agent_chain.chain_request`, `chainlang.stdlib.agent.think_request`):

- plain: the standard library and three small tools (what a new project has);
- assistant: examples/assistant (the seed's assistant: 10 tools of its own).

and for each task its messages' size, the estimate chainlang reserves of a budget
(`chainlang.llm.tiers.estimate_tokens`, 4 characters a token) and the size of the JSON Schema
sent with it (an endpoint turns it into a grammar; it is not part of the prompt):

- chain: agent.chain's first request, for a three-step plan;
- repair: its first repair (the refused answer and the checker's diagnostics added);
- think: agent.think on a thread of a few events (the turn's message, a plan, three results).

Target: a plain project's chain request under 1,500 tokens, so that a 2,048-token context
leaves room for the answer.

No network by default. With `--endpoint http://127.0.0.1:PORT/v1` (an OpenAI-compatible
server on loopback, e.g. SmolLM2 served by tests/llm/serve_model.py), each request is also sent
with `max_tokens: 1` and the server's own count (`usage.prompt_tokens`, the model's tokenizer
and chat template) is printed beside the estimate.

Usage: python benchmarks/prompt_tokens.py [--endpoint URL] [--model NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET = 1_500  # tokens of a plain project's agent.chain request
PLAN = "1. Get today's date\n2. Check the calendar for today\n3. Answer the user with the meetings"
WRONG = {"chain": [{"event": "tools.now"}, {"event": "calendar.check", "params": {"day": "{tools.now.date}"}}]}

PLAIN_TOOLS = '''\
from chainlang import event


@event("calendar.check", description="Check the calendar for a day: its meetings and appointments", idempotent=True)
def check(date: str, query: str = "") -> dict:
    return {"date": date, "events": []}


@event("email.search", description="Search the mailbox for messages from a sender or about a subject", idempotent=True)
def search(sender: str = "", subject: str = "", days: int = 7, unread: bool = False) -> dict:
    return {"matches": []}


@event("notes.write", description="Write a note in the project's notebook")
def write(title: str, text: str) -> dict:
    return {"ok": True}
'''

THREAD = [
    {"event": "user.input", "result": {"text": "What's on my schedule today?"}, "at": "2026-11-23T09:00:00Z"},
    {"event": "agent.think", "result": {"event": "agent.chain", "params": {"plan": PLAN}}, "at": "2026-11-23T09:00:01Z"},
    {"event": "tools.now", "result": {"iso": "2026-11-23T09:00:02+00:00", "date": "2026-11-23", "weekday": "Monday"},
     "at": "2026-11-23T09:00:02Z"},
    {"event": "calendar.check", "result": {"date": "2026-11-23", "events": [
        {"time": "09:00", "title": "Standup"}, {"time": "12:30", "title": "Dentist appointment (Dr. Patel)"},
        {"time": "14:00", "title": "Client call with Acme Corp"}, {"time": "16:00", "title": "1-on-1 with Maria"}]},
     "at": "2026-11-23T09:00:03Z"},
]


def requests(project: Path) -> list[tuple[str, list[dict[str, str]], dict[str, Any]]]:
    """(task, messages, schema) of the chain, repair and think requests in `project`."""
    from chainlang.llm.prompting import render
    from chainlang.registry.build import build_registry
    from chainlang.runtime.agent_chain import allowed_events, chain_request
    from chainlang.runtime.prepare import SubChains
    from chainlang.stdlib.agent import THREAD_TOKENS, fit_events, think_request

    registry = build_registry(start_dir=project)
    allowed = allowed_events(registry, ())
    chain, chain_schema = chain_request(registry, allowed, PLAN, project)
    # the repair: the checker's own diagnostics of a wrong answer, as agent.chain sends them
    text = json.dumps({"chainlang": 1, "steps": WRONG["chain"], "allow": sorted(allowed)}, indent=1)
    _, problems = SubChains(registry, registry, {}, [], project).from_text(str(project / "x.chain.yaml"), text)
    repair = chain + [{"role": "assistant", "content": json.dumps(WRONG)},
                      {"role": "user", "content": render("chain.repair.j2", {"problems": problems[:20]}, project)}]
    view = {"thread_id": "thread-1", "summary": "", "status": "active", "events": fit_events(THREAD, THREAD_TOKENS)}
    think, think_schema = think_request(registry, (), "thread-1", view, None, project)
    return [("chain", chain, chain_schema), ("repair", repair, chain_schema), ("think", think, think_schema)]


def counted(endpoint: str, model: str, messages: list[dict[str, str]], schema: dict[str, Any]) -> int | str:
    """The server's count of the prompt's tokens (`usage.prompt_tokens`), or what went wrong."""
    body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}}
    request = urllib.request.Request(endpoint.rstrip("/") + "/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as answer:
            return int(json.load(answer)["usage"]["prompt_tokens"])
    except Exception as exc:  # a figure for information: the line says why it is missing
        return f"({type(exc).__name__}: {str(exc)[:60]})"


def main() -> None:
    from chainlang.llm.tiers import estimate_tokens

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", help="an OpenAI-compatible server on loopback, for the real token counts")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        plain = Path(scratch)
        (plain / "tools.py").write_text(PLAIN_TOOLS, encoding="utf-8")
        (plain / "chainlang.toml").write_text('tools = ["tools.py"]\n', encoding="utf-8")
        print(f"{'project':<10} {'task':<7} {'chars':>6} {'estimate':>8} {'server':>7} {'schema':>7}")
        for label, project in (("plain", plain), ("assistant", ROOT / "examples" / "assistant")):
            here = Path.cwd()
            os.chdir(project)  # tools load relative to their project, as `chainlang run` does
            try:
                asked = requests(project)
            finally:
                os.chdir(here)
            for task, messages, schema in asked:
                text = "\n".join(m["content"] for m in messages)
                estimate = estimate_tokens(text)
                server = counted(args.endpoint, args.model, messages, schema) if args.endpoint else "-"
                verdict = ""
                if label == "plain" and task == "chain":
                    verdict = f"  target < {TARGET:,}: {'PASS' if estimate < TARGET else 'MISS'}"
                print(f"{label:<10} {task:<7} {len(text):>6} {estimate:>8} {server!s:>7} "
                      f"{len(json.dumps(schema)):>7}{verdict}")


if __name__ == "__main__":
    main()
