"""`triggers:` in chain files (LANGUAGE.md §12, issue 23 item 5), end to end: a real
`chainlang serve` on loopback registers them (at start and when the file changes),
`POST /events/NAME` runs an event trigger's chain with the payload as its inputs, a cron
trigger fires, `chainlang tasks list` shows each with its file, nothing is registered
twice (restarts, two serves on one store), and `[serve.events.NAME] token_env` gives an
endpoint a key of its own.

The chains log through the tools of tests/hooks_util.py (`t.log` writes
`.chainlang/state/log.jsonl`), so a test sees whether, and with which inputs, a chain ran.
The static checks (CL060-CL063) are goldens: tests/chains/err/trigger-*.chain.yaml and
bad-trigger.chain.yaml.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.hooks_util import labels, write, write_tools
from tests.serve_util import Servers, env_with, run, servers, show, wait_until  # noqa: F401  (servers: a fixture)

EVENTS = """\
events:
  deploy.finished:
    description: A deployment ended.
    payload:
      type: object
      properties: {team: {type: string}, status: {type: string}}
      required: [team, status]
  build.done:
    description: A build ended.
    payload: {type: object, properties: {n: {type: integer}}}
hooks: []
"""

REPORT = """\
chain: reports.deploy
inputs:
  team: {type: string}
  status: {type: string}
triggers:
  - event: deploy.finished
    where: "status == 'WANTED'"
steps:
  - t.log: {label: "report {inputs.team} {inputs.status}"}
"""

PLAIN = """\
chain: reports.deploy
inputs:
  team: {type: string}
  status: {type: string}
steps:
  - t.log: {label: "report {inputs.team} {inputs.status}"}
"""


def make_project(root: Path, wanted: str = "ok", toml: str = "") -> Path:
    write_tools(root)
    write(root, "chainlang.toml", 'tools = ["hk_tools.py"]\nchains = ["."]\n' + textwrap.dedent(toml))
    write(root, "events.hooks.yaml", EVENTS)
    write(root, "report.chain.yaml", REPORT.replace("WANTED", wanted))
    return root


def tasks(root: Path) -> list[dict[str, Any]]:
    listed = run(root, "tasks", "list", "--json")
    assert listed.returncode == 0, show(listed)
    return list(json.loads(listed.stdout)["tasks"])


def live(root: Path) -> list[dict[str, Any]]:
    return [t for t in tasks(root) if t.get("source") and t["status"] in ("pending", "active", "dead")]


def test_an_event_trigger_runs_the_chain_with_the_payload_as_its_inputs(tmp_path: Path, servers: Servers) -> None:
    root = make_project(tmp_path)
    server = servers.start(root)
    registered = live(root)
    assert [(t["type"], t["trigger"], t["condition"], t["source"]) for t in registered] == [
        ("hook", "post:deploy.finished", "status == 'ok'", "report.chain.yaml")], registered
    fired = server.event("deploy.finished", {"team": "web", "status": "ok"}, wait=True)
    assert fired.status_code == 200 and fired.json()["status"] == "ok", fired.text
    assert [f["hook"] for f in fired.json()["fired"]] == [registered[0]["task_id"]], fired.text
    assert labels(root) == ["report web ok"]
    # `where` is false: nothing runs
    skipped = server.event("deploy.finished", {"team": "web", "status": "failed"}, wait=True)
    assert skipped.status_code == 200 and skipped.json()["fired"] == [], skipped.text
    assert labels(root) == ["report web ok"]
    listed = run(root, "tasks", "list")
    assert f"{registered[0]['task_id']}  hook   active    post:deploy.finished  from report.chain.yaml" in listed.stdout, \
        show(listed)
    assert server.stop() == 0, server.describe()
    assert "registered the trigger " + registered[0]["task_id"] in server.stderr, server.describe()


@pytest.mark.slow
def test_a_trigger_the_file_changes_or_drops_is_changed_or_archived_while_serve_runs(tmp_path: Path,
                                                                                   servers: Servers) -> None:
    root = make_project(tmp_path, wanted="ok")
    server = servers.start(root)
    [first] = live(root)
    write(root, "report.chain.yaml", REPORT.replace("WANTED", "good"))
    wait_until("the changed trigger is registered", lambda: [t["condition"] for t in live(root)] == ["status == 'good'"],
               within=20, server=server)
    [second] = live(root)
    assert second["task_id"] != first["task_id"]
    assert {t["task_id"]: t["status"] for t in tasks(root)}[first["task_id"]] == "archived"
    assert server.event("deploy.finished", {"team": "a", "status": "ok"}, wait=True).json()["fired"] == []
    fired = server.event("deploy.finished", {"team": "b", "status": "good"}, wait=True).json()
    assert [f["hook"] for f in fired["fired"]] == [second["task_id"]], fired
    assert labels(root) == ["report b good"]
    # a file that does not check keeps its triggers (an edit half done), and serve says why
    write(root, "report.chain.yaml", REPORT.replace("WANTED", "good").replace("t.log:", "t.lgo:"))
    wait_until("serve said the file does not check", lambda: "its triggers are left as they were" in server.stderr,
               within=20, server=server)
    assert [t["task_id"] for t in live(root)] == [second["task_id"]]
    write(root, "report.chain.yaml", PLAIN)  # the file drops its trigger
    wait_until("the dropped trigger is archived", lambda: live(root) == [], within=20, server=server)
    assert server.event("deploy.finished", {"team": "c", "status": "good"}, wait=True).json()["fired"] == []
    assert labels(root) == ["report b good"]
    assert server.stop() == 0, server.describe()


@pytest.mark.slow
def test_nothing_is_registered_twice_across_restarts_or_by_two_serves(tmp_path: Path, servers: Servers) -> None:
    root = make_project(tmp_path)
    write(root, "daily.chain.yaml", """\
        chain: reports.daily
        inputs: {team: {type: string, default: all}}
        triggers:
          - cron: "0 8 * * 1-5"
            tz: Europe/Berlin
            inputs: {team: marketing}
        steps:
          - t.log: {label: "daily {inputs.team}"}
        """)
    one, two = servers.start(root), servers.start(root)  # two serves on one store, started together
    first = sorted((t["task_id"], t["type"], t.get("cron"), t["source"]) for t in live(root))
    assert [row[1:] for row in first] == [("repeat", "0 8 * * 1-5", "daily.chain.yaml"),
                                          ("hook", None, "report.chain.yaml")] or \
        [row[1:] for row in first] == [("hook", None, "report.chain.yaml"),
                                       ("repeat", "0 8 * * 1-5", "daily.chain.yaml")], first
    assert len(tasks(root)) == 2, tasks(root)
    # 08:00 in Berlin is 06:00 or 07:00 UTC, on a weekday
    due = next(t["due"] for t in live(root) if t["type"] == "repeat")
    assert due[11:16] in ("06:00", "07:00"), due
    assert one.stop() == 0 and two.stop() == 0
    again = servers.start(root)
    assert sorted((t["task_id"], t["type"], t.get("cron"), t["source"]) for t in live(root)) == first
    assert len(tasks(root)) == 2, tasks(root)
    assert again.stop() == 0, again.describe()


@pytest.mark.slow
def test_a_cron_trigger_fires_the_chain_with_its_inputs(tmp_path: Path, servers: Servers) -> None:
    root = make_project(tmp_path)
    write(root, "minute.chain.yaml", """\
        chain: reports.minute
        inputs: {team: {type: string, default: all}}
        triggers:
          - cron: "* * * * *"
            inputs: {team: marketing}
        steps:
          - t.log: {label: "minute {inputs.team}"}
        """)
    server = servers.start(root)
    [cron] = [t for t in live(root) if t["type"] == "repeat"]
    # pending, or active when the minute turned as the test looked (the trigger is firing)
    assert cron["source"] == "minute.chain.yaml" and cron["status"] in ("pending", "active"), cron
    wait_until("the cron trigger fired", lambda: "minute marketing" in labels(root), within=75, server=server)
    shown = run(root, "tasks", "show", cron["task_id"], "--json")
    runs = json.loads(shown.stdout)["runs"]
    assert runs and runs[0]["status"] == "ok", shown.stdout
    assert server.stop() == 0, server.describe()


KEYED = """\
[serve]
token_env = "SERVE_TOKEN"

[serve.events."deploy.finished"]
token_env = "DEPLOY_KEY"
"""


def test_an_event_with_a_key_of_its_own_takes_that_key_only(tmp_path: Path, servers: Servers) -> None:
    root = make_project(tmp_path, toml=KEYED)
    env = env_with(SERVE_TOKEN="serve-wide-token-1", DEPLOY_KEY="deploy-key-2")
    server = servers.start(root, env=env, token="serve-wide-token-1")
    url = "/events/deploy.finished?wait=1"
    body = {"team": "web", "status": "ok"}

    def post(path: str, token: str | None, data: Any = body) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {"Authorization": ""}
        return server.post(path, json=data, headers=headers)

    missing = post(url, None)
    assert missing.status_code == 401 and "key of its own" in missing.json()["error"], missing.text
    assert post(url, "serve-wide-token-1").status_code == 403  # the serve-wide token does not open it
    assert post(url, "deploy-key-3").status_code == 403
    assert labels(root) == []
    taken = post(url, "deploy-key-2")
    assert taken.status_code == 200 and taken.json()["status"] == "ok", taken.text
    assert labels(root) == ["report web ok"]
    # the other routes keep the serve-wide token, and the event's key opens none of them
    assert post("/events/build.done?wait=1", "serve-wide-token-1", {"n": 1}).status_code == 200
    assert post("/events/build.done?wait=1", "deploy-key-2", {"n": 1}).status_code == 401
    assert server.get("/healthz", headers={"Authorization": "Bearer deploy-key-2"}).status_code == 401
    assert server.stop() == 0
    assert "deploy-key-2" not in server.stdout + server.stderr


@pytest.mark.parametrize(("toml", "env", "said"), [
    (KEYED, {"SERVE_TOKEN": "serve-wide-token-1"}, "DEPLOY_KEY, but that variable is not set"),
    (KEYED, {"SERVE_TOKEN": "same-token", "DEPLOY_KEY": "same-token"}, "holds the serve-wide token"),
    ('[serve.events."deploy.finishd"]\ntoken_env = "DEPLOY_KEY"\n', {"DEPLOY_KEY": "deploy-key-2"},
     "did you mean deploy.finished?"),
    ('[serve.events.deploy.finished]\ntoken_env = "DEPLOY_KEY"\n', {"DEPLOY_KEY": "deploy-key-2"},
     'quote them, [serve.events."deploy.finished"]'),
])
def test_a_key_serve_cannot_use_stops_it_from_starting(tmp_path: Path, toml: str, env: dict[str, str],
                                                       said: str) -> None:
    root = make_project(tmp_path, toml=toml)
    proc = run(root, "serve", "--port", "0", env=env_with(**env))
    assert proc.returncode == 2 and said in proc.stderr, show(proc)
    assert "Traceback" not in proc.stderr and "same-token" not in proc.stderr + proc.stdout


# -- both engines: the same trigger on a Temporal project ----------------------------------


@pytest.fixture(scope="module")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.temporal_util import dev_server

    yield from dev_server(tmp_path_factory.mktemp("temporal") / "server.log")


@pytest.mark.slow
def test_a_posted_event_trigger_runs_the_chain_on_temporal_workers(temporal_server: str, tmp_path: Path,
                                                                   servers: Servers) -> None:
    import shutil
    import subprocess

    from tests.temporal_util import TEMPORAL_CLI, Workers, temporal_toml

    root = tmp_path
    shutil.copy(Path(__file__).resolve().parent / "run" / "run_tools.py", root / "tools.py")
    write(root, "chainlang.toml", temporal_toml(temporal_server, "chain-triggers"))
    write(root, "events.hooks.yaml", EVENTS)
    write(root, "report.chain.yaml", """\
        chain: reports.deploy
        inputs:
          team: {type: string}
          status: {type: string}
        triggers:
          - event: deploy.finished
            where: "status == 'ok'"
        steps:
          - test.echo: {value: "report {inputs.team} {inputs.status}"}
        """)
    workers = Workers(root)
    workers.start()
    try:
        server = servers.start(root)
        fired = server.event("deploy.finished", {"team": "web", "status": "ok"}, wait=True)
        assert fired.status_code == 200 and fired.json()["status"] == "ok", fired.text
        [hook] = fired.json()["fired"]
        assert hook["hook"].startswith("trigger-") and hook["status"] == "ok", fired.text
        skipped = server.event("deploy.finished", {"team": "web", "status": "failed"}, wait=True)
        assert skipped.json()["fired"] == [], skipped.text
        calls = [json.loads(line) for line in
                 (root / ".chainlang" / "state" / "calls.jsonl").read_text(encoding="utf-8").splitlines()]
        assert [c["value"] for c in calls] == ["report web ok"], calls
        # the event ran as a workflow on Temporal (its id is the emit's run id)
        described = subprocess.run([str(TEMPORAL_CLI), "workflow", "describe", "--workflow-id",
                                    fired.json()["run_id"], "--address", temporal_server],
                                   capture_output=True, text=True, timeout=60)
        assert described.returncode == 0 and "chainlang.emit" in described.stdout, described.stdout + described.stderr
        assert server.stop() == 0, server.describe()
    finally:
        workers.close()
