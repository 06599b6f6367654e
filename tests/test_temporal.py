"""The Temporal engine (LANGUAGE.md §14), through the CLI, against a real Temporal dev server
on loopback (tests/temporal_util.py; skipped, saying why, without the SDK or the CLI).

The contract: the same chains run on both engines, and each ends the same — exit code,
outputs, and the transcript's records once what changes from run to run is taken out (the
golden form of chainlang.testing). Then what only Temporal does: a worker killed in the
middle of a step, the run finishing on the other one without running a finished step
again; and a run's recorded history replaying on the interpreter as it is now.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from chainlang.testing.expect import golden_lines
from tests.helpers import cli, cli_here, records, show
from tests.temporal_util import Workers, dev_server, temporal_toml

REPO = Path(__file__).resolve().parent.parent
TOOLS = REPO / "tests" / "run" / "run_tools.py"
NOW = "2026-11-19T09:00:00+00:00"

pytestmark = pytest.mark.slow  # a Temporal server and workers: the full suite runs these, make test-fast does not

# name → (chain, the exit code both engines end with)
CONTRACT: dict[str, tuple[str, int]] = {
    "sequence": ("""
steps:
  - test.echo: {value: 20}
  - test.add: {a: "{test.echo.result}", b: 22}
  - user.notify: {message: "sum {test.add.result}"}
outputs: {sum: "{test.add.result}", first: "{test.echo.result}"}
""", 0),
    "parallel-and-foreach": ("""
steps:
  - [test.sleep: {seconds: 0.3, label: a}, {id: b, event: test.sleep, params: {seconds: 0.1, label: b}}]
  - id: each
    foreach: "[1, 2, 3]"
    steps:
      - test.add: {a: "{item}", b: 10}
outputs: {a: "{test.sleep.result}", b: "{b.result}", each: "{each.result}"}
""", 0),
    "branches-and-decide": ("""
inputs:
  n: {type: integer, default: 7}
steps:
  - if: "inputs.n > 5"
    then:
      - test.echo: {value: big}
    else:
      - test.echo: {value: small}
  - test.add: {a: 1, b: 1}
    decide: "inputs.n > 100"
outputs: {size: "{test.echo.result}"}
""", 0),
    "retry": ("""
steps:
  - test.flaky: {succeed_on: 3}
    retry: {attempts: 3, delay: 10ms, backoff: 2}
outputs: {attempt: "{test.flaky.result}"}
""", 0),
    "timeout": ("""
steps:
  - test.sleep: {seconds: 30}
    timeout: 1s
""", 1),
    "failure": ("""
steps:
  - test.echo: {value: before}
  - test.fail: {message: stop here}
  - test.echo: {value: after}
""", 1),
    "on-error-break": ("""
steps:
  - test.echo: {value: before}
  - test.fail: {message: stop here}
    on_error: break
  - test.echo: {value: after}
outputs: {last: "{test.echo.result}"}
""", 0),
    "limit": ("""
limits: {max_steps: 2}
steps:
  - test.echo: {value: 1}
  - test.echo: {value: 2}
  - test.echo: {value: 3}
""", 3),
    "hooks-and-sub-chains": ("""
steps:
  - math.double: {x: 4}
  - chain.run: {path: lib/double.chain.yaml, inputs: {x: 5}}
  - id: nested
    chain.run: {path: lib/nested.chain.yaml, inputs: {x: 1}}
  - user.notify: {message: "public"}
  - user.notify: {message: "the password is hunter2"}
hooks:
  - id: tag
    trigger: pre:user.notify
    set: {message: "[tagged] {message}"}
  - id: no-passwords
    trigger: pre:user.notify
    condition: message contains 'password'
    cancel: true
outputs: {named: "{math.double.value}", by_path: "{chain.run.value}"}
""", 0),
    "store": ("""
steps:
  - task.schedule: {type: once, at: "2026-11-20 09:00", action: [{user.notify: {message: hi}}], description: Say hi}
  - task.list
  - memory.append: {thread_id: t1, content: Met Ana about Beacon}
  - memory.search: {query: Beacon}
outputs: {tasks: "{task.list.tasks | length}", found: "{memory.search.matches | length}"}
""", 0),
    "agents": ("""
limits: {max_model_calls: 5}
steps:
  - agent.think: {thread_id: plan-1, prompt: "What is next for the launch?"}
  - agent.chain: {plan: "1. Echo the word launch"}
  - test.echo: {value: maybe}
    decide: "only when the launch is on track"
outputs: {thought: "{agent.think}", ran: "{agent.chain}", echoed: "{test.echo.result}"}
""", 0),
    "over-budget": ("""
limits: {max_tokens: 100}
steps:
  - test.echo: {value: before}
  - agent.think: {thread_id: plan-1, prompt: "What is next for the launch?"}
""", 3),
    # no hooks in force: each sub-chain is a child workflow (chainlang.engine.temporal.children)
    "sub-chains": ("""
steps:
  - id: first
    math.double: {x: 4}
  - chain.run: {path: lib/double.chain.yaml, inputs: {x: 5}}
  - id: each
    foreach: "[1, 2, 3]"
    math.double: {x: "{item}"}
  - id: nested
    chain.run: {path: lib/nested.chain.yaml, inputs: {x: 6}}
  - id: broken
    chain.run: {path: lib/fails.chain.yaml}
    on_error: continue
  - user.notify: {message: "after {broken.error.message}"}
outputs: {named: "{first.value}", by_path: "{chain.run.value}", each: "{each.result}",
          nested: "{nested.value}"}
""", 0),
    "sub-chain-over-max-steps": ("""
limits: {max_steps: 4}
steps:
  - test.echo: {value: 1}
  - chain.run: {path: lib/nested.chain.yaml, inputs: {x: 2}}
  - test.echo: {value: 3}
""", 3),
    "sub-chain-timeout": ("""
steps:
  - chain.run: {path: lib/slow.chain.yaml}
    timeout: 1s
""", 1),
    # {thread.ID.KEY}: read ahead by activities on Temporal, and again after each step
    "thread-references": ("""
inputs:
  thread_id: {type: string, default: plan-1}
steps:
  - user.notify: {message: "about {thread['plan-1'].summary}"}
  - test.echo: {value: first}
  - user.notify: {message: "the last echo: {thread['plan-1'].test.echo}"}
  - test.echo: {value: second}
  - user.notify: {message: "{thread['plan-1'].no_such_key}"}
    on_error: continue
outputs: {summary: "{thread['plan-1'].summary}", echo: "{thread['plan-1'].test.echo}"}
""", 0),
    "progress-and-clock": ("""
steps:
  - test.progress
  - test.now
outputs: {readings: "{test.now.result}"}
""", 0),
}

# the three model tiers, scripted (the same file for both engines)
ANSWERS = """
rules:
  - task: think
    when: "What is next for the launch?"
    answer: {event: agent.reply, params: {message: Book the kickoff}}
  - task: chain
    when: "Echo the word launch"
    answer: {chain: [{test.echo: {value: launch}}]}
  - task: decide
    answer: {action: continue, params: {value: maybe}}
  - task: ask
    when: "Label the launch"
    answer: {label: go, risks: [weather]}
"""
TIERS = "".join(f'\n[models.{tier}]\nprovider = "scripted"\nrules = "answers.yaml"\n' for tier in ("heavy", "fast", "light"))

# hooks on an external event: an emit fires them (chainlang emit), on either engine
HOOKS = """
events:
  order.placed:
    payload:
      type: object
      properties: {item: {type: string}, amount: {type: number}}
      required: [item, amount]
hooks:
  - id: big-order
    trigger: post:order.placed
    condition: "amount > 100"
    action:
      - test.add: {a: "{amount}", b: 1}
      - user.notify: {message: "big order of {item}: {test.add.result}"}
  - id: every-order
    trigger: post:order.placed
    action:
      - test.echo: {value: "{item}"}
      - test.echo: {value: "{item} for {thread['plan-1'].summary}"}
"""

DOUBLE = """
chain: math.double
inputs:
  x: {type: integer}
steps:
  - test.add: {a: "{inputs.x}", b: "{inputs.x}"}
outputs: {value: "{test.add.result}"}
"""


# sub-chains of sub-chains; one with hooks of its own (they fire in its child workflow)
NESTED = """
inputs:
  x: {type: integer}
steps:
  - math.double: {x: "{inputs.x}"}
  - user.notify: {message: "nested {math.double.value}, the plan is {thread['plan-1'].status}"}
hooks:
  - id: shout
    trigger: pre:user.notify
    set: {message: "{message}!"}
outputs: {value: "{math.double.value}"}
"""
FAILS = """
steps:
  - test.echo: {value: before}
  - test.fail: {message: stop here}
"""
SLOW = """
steps:
  - test.echo: {value: started}
  - test.sleep: {seconds: 30}
"""


# more of the contract as data: tests/engines/NAME.chain.yaml, whose first line is `# exit: N`
# (the exit code both engines end with); tools of their own in tests/engines/*_tools.py
ENGINE_CASES = REPO / "tests" / "engines"


def engine_cases() -> dict[str, tuple[str, int]]:
    cases: dict[str, tuple[str, int]] = {}
    for path in sorted(ENGINE_CASES.glob("*.chain.yaml")):
        text = path.read_text(encoding="utf-8")
        first = text.splitlines()[0] if text else ""
        found = re.fullmatch(r"# exit: (\d+)", first.strip())
        assert found, f"{path.name}: the first line must be `# exit: N`"
        cases[path.name.removesuffix(".chain.yaml")] = (text, int(found.group(1)))
    return cases


CONTRACT.update(engine_cases())


def make_project(directory: Path, toml: str) -> Path:
    directory.mkdir(parents=True)
    shutil.copy(TOOLS, directory / "tools.py")
    extras = sorted(ENGINE_CASES.glob("*_tools.py"))
    for extra in extras:
        shutil.copy(extra, directory / extra.name)
    listed = "".join(f'"{extra.name}", ' for extra in extras)
    toml = toml.replace('tools = ["tools.py"', f'tools = [{listed}"tools.py"', 1)
    (directory / "lib").mkdir()
    for name, text in (("double", DOUBLE), ("nested", NESTED), ("fails", FAILS), ("slow", SLOW)):
        (directory / "lib" / f"{name}.chain.yaml").write_text(text, encoding="utf-8")
    (directory / "chainlang.toml").write_text(toml + TIERS, encoding="utf-8")
    (directory / "answers.yaml").write_text(ANSWERS, encoding="utf-8")
    (directory / "orders.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    for name, (chain, _) in CONTRACT.items():
        (directory / f"{name}.chain.yaml").write_text(chain, encoding="utf-8")
    made = cli(directory, "threads", "create", "plan-1", "--summary", "Planning the Beacon launch")
    assert made.returncode == 0, show(made)
    return directory


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from dev_server(tmp_path_factory.mktemp("temporal") / "server.log")


@pytest.fixture(scope="module")
def engines(server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """Two copies of one project: on the embedded engine, and on Temporal (with a worker)."""
    base = tmp_path_factory.mktemp("engines")
    embedded = make_project(base / "embedded", 'tools = ["tools.py"]\nchains = ["lib"]\n')
    temporal = make_project(base / "temporal", temporal_toml(server, "contract").replace('chains = ["."]', 'chains = ["lib"]'))
    workers = Workers(temporal)
    workers.start()
    try:
        yield embedded, temporal
    finally:
        workers.close()


def comparable(recs: list[dict[str, Any]]) -> list[str]:
    """The golden form; sorted, as steps that run at once finish in any order."""
    return sorted(golden_lines(recs))


@pytest.mark.parametrize("name", list(CONTRACT))
def test_a_chain_ends_the_same_on_both_engines(engines: tuple[Path, Path], name: str) -> None:
    embedded, temporal = engines
    expected_exit = CONTRACT[name][1]
    outcomes = []
    for project in (embedded, temporal):
        args = ("run", f"{name}.chain.yaml", "--now", NOW, "--json", "--transcript", f"{name}.jsonl")
        # the embedded run in this process; the Temporal one in its own (the command ends it: cli/main.py)
        proc = cli_here(project, *args) if project == embedded else cli(project, *args, timeout=120)
        assert proc.returncode == expected_exit, f"{project.name}: {show(proc)}"
        assert "Traceback" not in proc.stderr, show(proc)
        outcomes.append((json.loads(proc.stdout), records(project, f"{name}.jsonl"), proc.stderr))
    (on_embedded, recs_embedded, err_embedded), (on_temporal, recs_temporal, err_temporal) = outcomes
    for result in (on_embedded, on_temporal):
        result.pop("run_id", None), result.pop("duration_ms", None), result.pop("transcript", None)
    assert on_temporal == on_embedded
    assert comparable(recs_temporal) == comparable(recs_embedded)
    # what the tools told the user reaches the terminal on both
    notes = [line for line in err_embedded.splitlines() if line.startswith("[info]")]
    assert [line for line in err_temporal.splitlines() if line.startswith("[info]")] == notes


@pytest.mark.parametrize("data", ['{"item": "piano", "amount": 900}', '{"item": "pen", "amount": 2}'])
def test_an_emit_fires_the_same_hooks_on_both_engines(engines: tuple[Path, Path], data: str) -> None:
    outcomes = []
    for project in engines:
        name = f"emit-{json.loads(data)['item']}.jsonl"
        proc = cli(project, "emit", "order.placed", "--data", data, "--now", NOW, "--json", "--transcript", name,
                   timeout=120)
        assert proc.returncode == 0, f"{project.name}: {show(proc)}"
        result = json.loads(proc.stdout)
        for key in ("run_id", "duration_ms", "transcript"):
            result.pop(key, None)
        for item in result.get("fired", []):
            item.pop("duration_ms", None)
        outcomes.append((result, comparable(records(project, name)),  # the hooks' actions run at once: any order
                         sorted(line for line in proc.stderr.splitlines() if line.startswith("[info]"))))
    assert outcomes[1] == outcomes[0]


def test_check_tells_what_the_temporal_engine_cannot_run(engines: tuple[Path, Path]) -> None:
    embedded, temporal = engines
    long_run = "limits: {max_steps: 20000}\nsteps:\n  - test.echo: {value: 1}\n"
    for project in engines:
        (project / "long.chain.yaml").write_text(long_run, encoding="utf-8")
    proc = cli(temporal, "check", "long.chain.yaml")
    assert proc.returncode == 1 and "CL038 not-on-engine" in proc.stdout and "51,200 events" in proc.stdout, show(proc)
    ran = cli(temporal, "run", "long.chain.yaml")
    assert ran.returncode == 1 and "CL038" in ran.stdout + ran.stderr, show(ran)
    assert cli(embedded, "check", "long.chain.yaml").returncode == 0  # the embedded engine has no such bound


def test_an_unreachable_server_is_a_usage_error(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", temporal_toml("127.0.0.1:1", "nowhere"))
    proc = cli(project, "run", "sequence.chain.yaml", timeout=120)
    assert proc.returncode == 2 and "cannot reach Temporal at 127.0.0.1:1" in proc.stderr, show(proc)
    assert "Traceback" not in proc.stderr
    worker = cli(project, "worker", timeout=120)
    assert worker.returncode == 2 and "cannot reach Temporal" in worker.stderr, show(worker)


def test_a_worker_outside_a_temporal_project_says_so(tmp_path: Path) -> None:
    proc = cli(tmp_path, "worker")
    assert proc.returncode == 2 and 'kind = "temporal"' in proc.stderr, show(proc)


# -- a worker dies in the middle of a step -------------------------------------------------------

KILLED = """
steps:
  - test.send: {to: first}
  - test.slow_send: {to: second, name: slow.pid, seconds: 4}
  - test.send: {to: third}
outputs: {last: "{test.send.result}"}
"""


def test_a_killed_worker_s_step_finishes_on_the_other_and_nothing_runs_twice(server: str, tmp_path: Path) -> None:
    import subprocess

    from tests.helpers import clean_env, command

    project = make_project(tmp_path / "p", temporal_toml(server, "kill"))
    (project / "killed.chain.yaml").write_text(KILLED, encoding="utf-8")
    workers = Workers(project)
    try:
        first, second = workers.start(), workers.start()
        run = subprocess.Popen(command("run", "killed.chain.yaml", "--json", "--transcript", "killed.jsonl"),
                               cwd=project, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        marker = project / ".chainlang" / "state" / "slow.pid"
        deadline = time.monotonic() + 60
        while not marker.exists():  # test.slow_send writes its worker's pid, then sleeps
            assert time.monotonic() < deadline and run.poll() is None, "the slow step never started"
            time.sleep(0.05)
        pid = int(marker.read_text())
        assert pid in (first.pid, second.pid)
        os.killpg(pid, signal.SIGKILL)  # the worker running the step, in the middle of it
        started = time.monotonic()
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, f"{out}\n{err}"
        assert json.loads(out) == {"last": {"sent": "third"}}
        calls = [json.loads(line) for line in (marker.parent / "calls.jsonl").read_text().splitlines()]
        by_step = {step: [c for c in calls if c["step"] == step] for step in ("1", "2", "3")}
        assert len(by_step["1"]) == 1 and len(by_step["3"]) == 1, calls  # finished steps never ran again
        slow = by_step["2"]  # started on the killed worker, then on the other, with the same key
        assert [c["phase"] for c in slow] == ["start", "start", "end"], slow
        assert len({c["key"] for c in slow}) == 1 and {c["attempt"] for c in slow} == {1}
        recs = records(project, "killed.jsonl")
        assert [(r["step"], r["status"]) for r in recs if r["type"] == "step_finished"] == [
            ("1", "ok"), ("2", "ok"), ("3", "ok")]
        assert time.monotonic() - started < 60
    finally:
        workers.close()


# -- the seed's assistant on both engines ---------------------------------------------------------

ASSISTANT = REPO / "examples" / "assistant"
# "The world" and scenario 1 of docs/guides/assistant.md: threads, memory, tasks and the three
# model tiers (scripted); THREAD stands for the thread the first message started
CONVERSATION = [
    ["run", "history/2026-11-17.chain.yaml", "--now", "2026-11-17T18:00:00+00:00"],
    ["run", "history/2026-11-18.chain.yaml", "--now", "2026-11-18T18:00:00+00:00"],
    ["threads", "create", "john-contract", "--summary",
     "Sent John Miller the Acme contract draft by email on Tuesday; waiting for his reply."],
    ["run", "message.chain.yaml", "--now", "2026-11-19T08:30:00+00:00", "--input",
     "message=Good morning, what's on my schedule today?"],
    ["run", "message.chain.yaml", "--now", "2026-11-19T08:32:00+00:00", "--input", "thread_id=THREAD", "--input",
     "message=Actually, first check if John replied to my email"],
    ["run", "message.chain.yaml", "--now", "2026-11-19T08:33:00+00:00", "--input", "thread_id=john-contract",
     "--input", "message=Actually, first check if John replied to my email"],
    ["run", "message.chain.yaml", "--now", "2026-11-19T08:41:00+00:00", "--input", "thread_id=THREAD", "--input",
     "message=Never mind, go back to my schedule. Also remind me to buy groceries after work"],
    ["threads", "show", "THREAD", "--json"],
    ["tasks", "list", "--json"],
]


def test_the_assistant_s_conversation_is_the_same_on_both_engines(server: str, tmp_path: Path) -> None:
    import re

    said: dict[str, list[str]] = {}
    for engine in ("embedded", "temporal"):
        project = tmp_path / engine
        shutil.copytree(ASSISTANT, project, ignore=shutil.ignore_patterns(".chainlang", "__pycache__", "tests"))
        workers = Workers(project)
        if engine == "temporal":
            with (project / "chainlang.toml").open("a", encoding="utf-8") as toml:
                toml.write(f'\n[engine]\nkind = "temporal"\naddress = "{server}"\ntask_queue = "assistant"\n')
            workers.start()
        thread = ""
        try:
            for args in CONVERSATION:
                args = [a.replace("THREAD", thread) for a in args]
                args += ["--json"] if args[0] == "run" else []
                # on Temporal in a process of its own (the command ends it after talking to Temporal)
                proc = cli(project, *args, timeout=180) if engine == "temporal" else cli_here(project, *args)
                assert proc.returncode == 0, f"{engine}: {' '.join(args)}: {show(proc)}"
                out = proc.stdout
                if not thread and args[0] == "run" and "message.chain.yaml" in args:
                    thread = json.loads(out)["thread_id"]
                said.setdefault(engine, []).append(out)
        finally:
            workers.close()

    def same(text: str) -> str:  # ids made of random bits, by order of appearance; run ids; times of day
        names: dict[str, str] = {}
        text = re.sub(r"\b(thread|task)-[0-9a-f]{12}\b", lambda m: names.setdefault(m.group(0), f"{m.group(1)}-{len(names)}"), text)
        text = re.sub(r"\b\d{8}T\d{6}Z-[0-9a-f]{6,10}\b", "RUN", text)
        # a thread's summary is extractive over its events in the order they were added, and the
        # morning's parallel steps (calendar.check, task.list) add theirs in the order they end
        text = re.sub(r'"summary": "[^"]*"', '"summary": "…"', text)
        return re.sub(r'"(created_at|updated_at|at|origin)": "[^"]*"', r'"\1": "…"', text)

    def group_of(event: dict) -> tuple[str, str] | None:
        """(run, parent step) for the event of a step of a parallel group or a `steps:` block
        (a path `…N.K`), None for others (an `if` branch's `…then.K` is not a group)."""
        step = event.get("step") or ""
        head, _, last = step.rpartition(".")
        if not last.isdigit() or not re.split(r"[./]", head)[-1].isdigit():
            return None
        return (str(event.get("run_id")), head)

    def settled(text: str) -> str:
        # §13 keeps a thread's events in the order they were added, so a step's events come
        # after those of the steps it follows; but the steps of a parallel group (the morning's
        # calendar.check and task.list) end, and add theirs, in whatever order the machine's
        # load gives them. Events of sibling steps added one after another are therefore put
        # in step order (their seq numbers staying where they were); all else keeps its place.
        try:
            shown = json.loads(text)
        except ValueError:
            return text
        if not isinstance(shown, dict) or not isinstance(shown.get("events"), list):
            return text
        events, out = shown["events"], []
        while events:
            size = 1
            while size < len(events) and group_of(events[0]) is not None \
                    and group_of(events[size]) == group_of(events[0]):
                size += 1
            group, events = events[:size], events[size:]
            ordered = sorted(group, key=lambda e: int(e["step"].rpartition(".")[2])) if size > 1 else group
            out.extend({**e, "seq": first["seq"]} for e, first in zip(ordered, group))
        return json.dumps({**shown, "events": out}, ensure_ascii=False) + "\n"

    assert [same(settled(t)) for t in said["temporal"]] == [same(settled(t)) for t in said["embedded"]]


def test_a_worker_stops_cleanly_on_sigterm(server: str, tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", temporal_toml(server, "stopping"))
    workers = Workers(project)
    try:
        proc = workers.start()
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        log = (project / "worker-1.log").read_text(encoding="utf-8")
        assert "Traceback" not in log, log
    finally:
        workers.close()


def test_resume_says_a_run_on_temporal_goes_on_there(engines: tuple[Path, Path]) -> None:
    _, temporal = engines
    ran = cli(temporal, "run", "sequence.chain.yaml", "--transcript", "again.jsonl", timeout=120)
    assert ran.returncode == 0, show(ran)
    resumed = cli(temporal, "resume", "again.jsonl")
    assert resumed.returncode == 2 and "runs on Temporal" in resumed.stderr, show(resumed)
    assert "Traceback" not in resumed.stderr


SCHEDULE = """
steps:
  - task.schedule: {type: delay, interval: 1s, id: soon, action: [{test.echo: {value: due}}]}
"""


def test_serve_hands_events_and_due_tasks_to_the_workers(engines: tuple[Path, Path]) -> None:
    import subprocess

    from tests.serve_util import Servers, wait_until
    from tests.temporal_util import TEMPORAL_CLI

    _, temporal = engines
    (temporal / "schedule.chain.yaml").write_text(SCHEDULE, encoding="utf-8")
    with Servers() as servers:
        server = servers.start(temporal)
        reply = server.post("/events/order.placed?wait=1", json={"item": "harp", "amount": 500})
        assert reply.status_code == 200 and reply.json()["status"] == "ok", server.describe()
        assert sorted(f["hook"] for f in reply.json()["fired"]) == ["big-order", "every-order"]
        # the event ran as a workflow on Temporal (its id is the emit's run id)
        described = subprocess.run([str(TEMPORAL_CLI), "workflow", "describe", "--workflow-id",
                                    reply.json()["run_id"], "--address", server_address(temporal)],
                                   capture_output=True, text=True, timeout=60)
        assert described.returncode == 0 and "chainlang.emit" in described.stdout, described.stdout + described.stderr
        scheduled = cli(temporal, "run", "schedule.chain.yaml", timeout=120)
        assert scheduled.returncode == 0, show(scheduled)

        def fired() -> bool:
            listed = cli(temporal, "tasks", "show", "soon", "--json")
            return listed.returncode == 0 and json.loads(listed.stdout).get("status") == "completed"

        wait_until("the task fired on the workers", fired, within=60, server=server)
        assert "Traceback" not in server.stderr, server.describe()
    calls = [json.loads(line) for line in (temporal / ".chainlang" / "state" / "calls.jsonl").read_text().splitlines()]
    assert any(c.get("value") == "due" for c in calls)


def test_sub_chains_run_as_child_workflows(engines: tuple[Path, Path]) -> None:
    """Each sub-chain step is a workflow of its own (id RUN/STEP@ATTEMPT), the foreach's items at
    once, a sub-chain's sub-chain a child of the child, and the chain agent.chain wrote; with
    hooks in force too (the contract above shows that they fire there as on the embedded engine)."""
    import subprocess

    from tests.temporal_util import TEMPORAL_CLI

    _, temporal = engines
    address = server_address(temporal)

    def children(run_id: str) -> list[str]:
        listed = subprocess.run([str(TEMPORAL_CLI), "workflow", "list", "--address", address, "--output", "json",
                                 "--query", f"WorkflowType = 'chainlang.subchain' AND WorkflowId STARTS_WITH '{run_id}/'"],
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        return sorted(item["execution"]["workflowId"] for item in json.loads(listed.stdout or "[]"))

    ran = {}
    for name in ("sub-chains", "hooks-and-sub-chains", "agents"):
        proc = cli(temporal, "run", f"{name}.chain.yaml", "--transcript", f"children-{name}.jsonl", timeout=120)
        assert proc.returncode == 0, show(proc)
        ran[name] = records(temporal, f"children-{name}.jsonl")[0]["run_id"]
    expected = [f"{ran['sub-chains']}/{step}@1" for step in ("1", "2", "3[0]", "3[1]", "3[2]", "4", "4/1", "5")]

    def listed() -> bool:  # the list is Temporal's visibility store: it may lag a moment behind
        return children(ran["sub-chains"]) == sorted(expected)

    deadline = time.monotonic() + 30
    while not listed() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert children(ran["sub-chains"]) == sorted(expected)
    assert children(ran["agents"]) == [f"{ran['agents']}/2@1"]  # the chain agent.chain wrote
    assert children(ran["hooks-and-sub-chains"]) == sorted(f"{ran['hooks-and-sub-chains']}/{step}@1" for step in ("1", "2", "3", "3/1"))


def test_an_emit_taken_up_again_is_not_run_again_on_the_workers(engines: tuple[Path, Path]) -> None:
    """`emit --id` after its process died: when the transcript never began, the workflow that
    process started is followed (not started a second time); when it had begun, its end is
    waited for (not resumed here). The hooks' steps ran once either way."""
    import sqlite3

    _, temporal = engines
    calls = temporal / ".chainlang" / "state" / "calls.jsonl"

    def echoed() -> int:
        return sum('"lute"' in line for line in calls.read_text(encoding="utf-8").splitlines()) if calls.exists() else 0

    def emit() -> dict[str, Any]:
        proc = cli(temporal, "emit", "order.placed", "--data", '{"item": "lute", "amount": 5}', "--id", "lute-1",
                   "--json", "--transcript", "lute.jsonl", timeout=120)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, show(proc)
        return dict(json.loads(proc.stdout))

    def died(keep_transcript: bool) -> None:  # what a process killed at that point leaves behind
        with sqlite3.connect(temporal / ".chainlang" / "store.db") as db:
            db.execute("UPDATE emits SET status = 'started', finished_at = NULL WHERE key = 'lute-1'")
        if not keep_transcript:
            (temporal / "lute.jsonl").write_text("", encoding="utf-8")

    first = emit()
    assert first["status"] == "ok" and echoed() == 1, first
    whole = (temporal / "lute.jsonl").read_text(encoding="utf-8")
    died(keep_transcript=False)
    again = emit()
    assert (again["run_id"], again["status"], echoed()) == (first["run_id"], "ok", 1), again
    assert comparable(records(temporal, "lute.jsonl")) == comparable(
        [json.loads(line) for line in whole.splitlines()])  # the same records, read again from the workflow
    died(keep_transcript=True)
    third = emit()
    assert (third["run_id"], third["status"], echoed()) == (first["run_id"], "ok", 1), third
    assert sorted(f["hook"] for f in third["fired"]) == ["every-order"]
    assert emit()["status"] == "duplicate"  # and the claim's end is recorded


def server_address(project: Path) -> str:
    import tomllib

    return str(tomllib.loads((project / "chainlang.toml").read_text(encoding="utf-8"))["engine"]["address"])


def test_without_a_worker_the_run_says_it_waits_for_one(server: str, tmp_path: Path) -> None:
    import subprocess

    from tests.helpers import clean_env, command

    project = make_project(tmp_path / "p", temporal_toml(server, "nobody-polls"))
    import threading

    proc = subprocess.Popen(command("run", "sequence.chain.yaml"), cwd=project, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    # Ctrl-C once it says it waits (not after a guessed while: a busy machine starts it slowly)
    deadline = time.monotonic() + 120
    while not any("waiting for a worker on the task queue 'nobody-polls'" in line for line in said):
        assert proc.poll() is None and time.monotonic() < deadline, "".join(said)
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # Ctrl-C: this process stops following; the run stays on Temporal
    proc.wait(timeout=30)
    reader.join(timeout=30)
    out, err = proc.stdout.read() if proc.stdout else "", "".join(said)
    assert "chainlang worker" in err
    assert proc.returncode == 130 and "the run goes on on Temporal's workers" in err, err
    assert "Traceback" not in err


SLOW_HOOK = """
events:
  parcel.sent:
    payload: {type: object, properties: {to: {type: string}}, required: [to]}
hooks:
  - id: slow-send
    trigger: post:parcel.sent
    action:
      - test.slow_send: {to: "{to}", name: parcel.pid, seconds: 4}
"""


def test_a_serve_killed_mid_event_is_taken_over_without_running_the_event_again(engines: tuple[Path, Path]) -> None:
    from tests.serve_util import Servers, wait_until

    _, temporal = engines
    (temporal / "parcels.hooks.yaml").write_text(SLOW_HOOK, encoding="utf-8")
    marker = temporal / ".chainlang" / "state" / "parcel.pid"
    try:
        with Servers() as servers:
            first = servers.start(temporal)
            reply = first.post("/events/parcel.sent", json={"to": "Ann"}, headers={"Idempotency-Key": "parcel-1"})
            assert reply.status_code in (200, 202), reply.text
            wait_until("the slow step started on a worker", marker.exists, within=60, server=first)
            first.kill()  # SIGKILL: serve dies in the middle of the event; the workflow goes on
            second = servers.start(temporal)
            again = {}

            def recorded() -> bool:  # the next serve took the emit over and recorded its end
                nonlocal again
                again = second.post("/events/parcel.sent?wait=1", json={"to": "Ann"},
                                    headers={"Idempotency-Key": "parcel-1"}).json()
                return again.get("status") == "duplicate" and (again.get("previous") or {}).get("status") == "ok"

            wait_until("the taken-over emit ended ok", recorded, within=60, server=second)
            assert "Traceback" not in second.stderr, second.describe()
        calls = [json.loads(line) for line in (marker.parent / "calls.jsonl").read_text().splitlines()]
        sent = [c for c in calls if c.get("to") == "Ann"]
        assert [c["phase"] for c in sent] == ["start", "end"], sent  # the side effect once: nothing ran it again
    finally:
        (temporal / "parcels.hooks.yaml").unlink()
