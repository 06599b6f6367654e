"""Beyond one machine with no host that matters: two `chainlang serve` processes (two copies
of the project, as on two hosts) share one PostgreSQL store and hand their firings to
Temporal's workers. A repeat task fires at each due moment once, whichever serve claims
it, and goes on firing when one serve is killed (SIGKILL). Real servers on loopback:
PostgreSQL (tests/pg_util.py) and a Temporal dev server (tests/temporal_util.py); skipped,
saying why, where either is missing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.helpers import cli, show
from tests.pg_util import pg_server, pg_url  # noqa: F401  (fixtures)
from tests.temporal_util import Workers, dev_server, temporal_toml

pytestmark = pytest.mark.slow

TOOLS = Path(__file__).resolve().parent / "run" / "run_tools.py"
REPEAT = """
steps:
  - task.schedule: {type: repeat, interval: 1s, id: tick, misfire: skip, action: [{test.echo: {value: tick}}]}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from dev_server(tmp_path_factory.mktemp("temporal") / "server.log")


def runs(project: Path) -> list[dict[str, Any]]:
    shown = cli(project, "tasks", "show", "tick", "--json")
    assert shown.returncode == 0, show(shown)
    return list(json.loads(shown.stdout).get("runs") or [])


def test_two_serves_on_one_store_fire_each_moment_of_a_repeat_task_once(
        server: str, pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    from tests.serve_util import Servers, wait_until

    hosts = []
    for name in ("host-a", "host-b"):
        project = tmp_path / name
        project.mkdir()
        shutil.copy(TOOLS, project / "tools.py")
        (project / "chainlang.toml").write_text(temporal_toml(server, "two-serves") + f'\n[store]\nurl = "{pg_url}"\n',
                                                encoding="utf-8")
        (project / "repeat.chain.yaml").write_text(REPEAT, encoding="utf-8")
        hosts.append(project)
    workers = Workers(hosts[0])
    workers.start()
    try:
        with Servers() as servers:
            first, second = servers.start(hosts[0]), servers.start(hosts[1])
            scheduled = cli(hosts[0], "run", "repeat.chain.yaml", timeout=120)
            assert scheduled.returncode == 0, show(scheduled)

            def finished(count: int) -> bool:
                return sum(run["status"] == "ok" for run in runs(hosts[1])) >= count

            wait_until("three firings", lambda: finished(3), within=90, server=first)
            first.kill()  # SIGKILL: the other serve goes on alone
            before = len(runs(hosts[1]))
            wait_until("three more firings", lambda: finished(before + 3), within=90, server=second)
            assert "Traceback" not in second.stderr, second.describe()
            cli(hosts[1], "tasks", "cancel", "tick")
        fired = runs(hosts[1])
        due = [run["due_at"] for run in fired]
        assert len(due) == len(set(due)), fired  # each due moment once, across both serves
        assert {run["status"] for run in fired} <= {"ok", "running"}, fired
        assert any("/host-b/" in run["transcript"] for run in fired), fired  # after the kill at least
        # every firing ran on the workers, once: the echo's side effect is on host a (the worker's copy)
        calls = [json.loads(line) for line in
                 (hosts[0] / ".chainlang" / "state" / "calls.jsonl").read_text(encoding="utf-8").splitlines()]
        ticks = [call for call in calls if call.get("value") == "tick"]
        ok = sum(run["status"] == "ok" for run in fired)
        assert ok <= len(ticks) <= len(fired), (ticks, fired)
        assert not (hosts[1] / ".chainlang" / "state" / "calls.jsonl").exists()
    finally:
        workers.close()
