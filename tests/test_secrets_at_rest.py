"""Secrets never at rest in clear (issue 21, deliverable 3; LANGUAGE.md §16), end to end
through the CLI and a real serve on loopback.

A project knows two secrets: the API key of a model tier (`api_key_env`) and a declared
`[secrets] crm = {env = "CRM_TOKEN"}`. A tool returns both (as a leaky CRM lookup would),
and a chain attached to a thread schedules a task and registers a hook whose descriptions
and actions carry that result (the task captures it); an event is emitted with both and a
`password=...` in its payload, then posted to a running serve, which also fires the task.
Afterwards neither secret appears in a dump of store.db, in any output of `chainlang
tasks` / `chainlang threads`, in serve's `GET /`, `/runs/ID` and report pages, or in the
HTML report; the password is in none of the store's rows either. The values are chosen so
that the lexical rule alone (what threads masked before) would not catch them.

Also: rows written before the store masked (secrets in clear) are masked by every command
and page that shows them; the masking is idempotent (a masked definition masked again is
itself, so digests of stored definitions stay stable), and a masked task still fires.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.serve_util import Servers, env_with, run, servers, show, wait_until  # noqa: F401 - servers is a fixture

MODEL_KEY = "zq-model-key-7f3a9"  # no secret-looking prefix, too short for the lexical rule
CRM_TOKEN = "crm-tok-55c1e2b9"
PASSWORD = "hunter2-at-rest"
SECRETS = (MODEL_KEY, CRM_TOKEN)

TOML = """\
tools = ["tools.py"]

[models.heavy]
base_url = "http://127.0.0.1:9/v1"
model = "never-called"
api_key_env = "B1_MODEL_KEY"

[secrets]
crm = {env = "CRM_TOKEN"}
"""

TOOLS = '''\
import os

from chainlang import event


@event("crm.lookup", description="A CRM record (this one leaks the credentials it used)", idempotent=True)
def lookup() -> dict:
    return {"note": f"call with key {os.environ['B1_MODEL_KEY']} and token {os.environ['CRM_TOKEN']}"}


@event("crm.echo", description="Return the text given", idempotent=True)
def echo(text: str = "") -> str:
    return text
'''

HOOKS = """\
events:
  crm.update:
    description: A CRM record changed.
    payload:
      type: object
      properties: {note: {type: string}, auth: {type: string}, password: {type: string}}
      required: [note]
hooks:
  - id: on-update
    trigger: post:crm.update
    action:
      - crm.echo: {text: "updated: {note}"}
"""

CHAIN = """\
steps:
  - crm.lookup
  - event: task.schedule
    id: remind
    params:
      type: delay
      interval: 1s
      description: "remind me: {crm.lookup.note}"
      action:
        - crm.echo: {text: "{crm.lookup.note}"}
  - event: task.register
    id: watch
    params:
      trigger: post:crm.update
      description: "watch: {crm.lookup.note}"
      action:
        - crm.echo: {text: "seen {crm.lookup.note}"}
outputs:
  task_id: "{remind.task_id}"
  hook_id: "{watch.task_id}"
"""


def make_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (("chainlang.toml", TOML), ("tools.py", TOOLS), ("crm.hooks.yaml", HOOKS),
                       ("remind.chain.yaml", CHAIN)):
        (root / name).write_text(text, encoding="utf-8")
    return root


def secret_env() -> dict[str, str]:
    return env_with(B1_MODEL_KEY=MODEL_KEY, CRM_TOKEN=CRM_TOKEN)


def cli(project: Path, *args: str) -> str:
    """`chainlang ARGS` with both secrets in the environment; its stdout and stderr (it must succeed)."""
    done = run(project, *args, env=secret_env())
    assert done.returncode == 0, show(done)
    assert "Traceback" not in done.stderr, show(done)
    return done.stdout + done.stderr


def store_dump(project: Path) -> str:
    """Everything store.db holds, as SQL text (what a backup or a copied file gives away)."""
    conn = sqlite3.connect(project / ".chainlang" / "store.db")
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def leaks(text: str, values: tuple[str, ...] = SECRETS) -> list[str]:
    """The values found in `text` (also JSON-escaped); empty when none is."""
    return [v for v in values if v in text or json.dumps(v)[1:-1] in text]


@pytest.mark.slow
def test_no_secret_reaches_the_store_the_commands_or_serve_s_pages(tmp_path: Path, servers: Servers) -> None:
    project = make_project(tmp_path / "crm")
    cli(project, "threads", "create", "t-crm", "--summary", f"started with {CRM_TOKEN}")
    ran = run(project, "run", "remind.chain.yaml", "--json", "--thread", "t-crm", env=secret_env())
    assert ran.returncode == 0, show(ran)
    outputs = json.loads(ran.stdout)
    task_id, hook_id = outputs["task_id"], outputs["hook_id"]
    surfaces: dict[str, str] = {"run": ran.stdout + ran.stderr}
    payload = {"note": f"rotated {MODEL_KEY} / {CRM_TOKEN}", "auth": f"password={PASSWORD}", "password": PASSWORD}
    surfaces["emit"] = cli(project, "emit", "crm.update", "--data", json.dumps(payload), "--id", "crm-1", "--json")

    server = servers.start(project, env=secret_env())
    posted = server.event("crm.update", payload, key="crm-2", wait=True)
    assert posted.status_code == 200 and posted.json()["status"] == "ok", posted.text
    # the scheduled task (due a second after the chain ran) fires with its masked definition: it still checks and runs
    wait_until("the task fired and completed",
               lambda: json.loads(cli(project, "tasks", "show", task_id, "--json"))["status"] == "completed",
               within=20, server=server)
    task = json.loads(cli(project, "tasks", "show", task_id, "--json"))
    assert [r["status"] for r in task["runs"]] == ["ok"], task
    fired_run = task["runs"][0]["run_id"]
    posted_run = posted.json()["run_id"]
    surfaces["home page"] = server.get("/").text
    for run_id in (posted_run, fired_run):
        surfaces[f"/runs/{run_id}"] = server.get(f"/runs/{run_id}").text
        report = server.get(f"/runs/{run_id}/report")
        assert report.status_code == 200, report.text
        surfaces[f"/runs/{run_id}/report"] = report.text
    assert server.stop() == 0, server.describe()
    surfaces["serve"] = server.stdout + server.stderr

    for args in (("tasks", "list"), ("tasks", "list", "--json"), ("tasks", "show", task_id),
                 ("tasks", "show", task_id, "--json"), ("tasks", "show", hook_id, "--json"),
                 ("threads", "list"), ("threads", "list", "--json"), ("threads", "show", "t-crm"),
                 ("threads", "show", "t-crm", "--json")):
        surfaces[" ".join(args)] = cli(project, *args)
    html = project / "report.html"
    cli(project, "report", str(project / ".chainlang" / "runs" / f"{fired_run}.jsonl"), "-o", str(html))
    surfaces["report"] = html.read_text(encoding="utf-8")
    dump = store_dump(project)
    surfaces["store.db"] = dump

    found = {where: leaks(text) for where, text in surfaces.items() if leaks(text)}
    assert not found, f"secrets shown or stored in clear: {found}"
    assert PASSWORD not in dump, "the posted password is kept in clear in store.db"
    for stored_id in (task_id, hook_id):  # the run said that what the task runs was masked, and what to do
        assert f"task {stored_id}: a secret in its action or in the values it captured is stored as ***" in ran.stderr
    # what was masked is still there, masked: the rows were written, not dropped
    assert "remind me: call with key *** and token ***" in surfaces["home page"]
    shown = json.loads(surfaces[f"tasks show {task_id} --json"])
    assert shown["definition"]["captured"] == {"crm.lookup.note": "call with key *** and token ***"}
    assert shown["description"] == "remind me: call with key *** and token ***"
    thread = json.loads(surfaces["threads show t-crm --json"])
    assert thread["summary"] == "started with ***"
    assert {"note": "call with key *** and token ***"} in [e["result"] for e in thread["events"]]
    assert '"password": "***"' in dump and "password=***" in dump  # the emits' payloads, masked


def test_rows_stored_before_the_store_masked_are_masked_where_they_are_shown(tmp_path: Path,
                                                                             servers: Servers) -> None:
    """A store written by an older chainlang holds its secrets in clear: every command and page
    that shows its rows masks them (the store itself is not rewritten: see docs, "What the store keeps")."""
    from chainlang.store import open_store

    project = make_project(tmp_path / "old")
    definition = {"schedule": {"type": "repeat", "interval": "1 day"}, "misfire": "once",
                  "action": [{"crm.echo": {"text": f"key {MODEL_KEY}"}}], "captured": {},
                  "description": f"nightly with {CRM_TOKEN}"}
    with open_store(project) as store:
        store.add_task("schedule", definition, id="old-task", next_run="2099-01-01T00:00:00+00:00", status="pending")
        store.create_thread("old-thread")
        store.add_event("old-thread", "crm.lookup", {})
    conn = sqlite3.connect(project / ".chainlang" / "store.db")  # as an older chainlang wrote them: in clear
    with conn:
        conn.execute("UPDATE tasks SET definition = ? WHERE id = 'old-task'", (json.dumps(definition),))
        conn.execute("UPDATE threads SET summary = ? WHERE id = 'old-thread'", (f"about {MODEL_KEY}",))
        conn.execute("UPDATE thread_events SET result = ? WHERE thread_id = 'old-thread'",
                     (json.dumps({"note": f"token {CRM_TOKEN}"}),))
    conn.close()
    assert leaks(store_dump(project)) == list(SECRETS)  # the premise: in clear in the file

    surfaces = {" ".join(args): cli(project, *args) for args in (
        ("tasks", "list"), ("tasks", "list", "--json"), ("tasks", "show", "old-task"),
        ("tasks", "show", "old-task", "--json"), ("threads", "list"), ("threads", "list", "--json"),
        ("threads", "show", "old-thread"), ("threads", "show", "old-thread", "--json"))}
    server = servers.start(project, env=secret_env())
    surfaces["home page"] = server.get("/").text
    found = {where: leaks(text) for where, text in surfaces.items() if leaks(text)}
    assert not found, f"secrets of old rows shown in clear: {found}"
    assert "nightly with ***" in surfaces["home page"]
    assert json.loads(surfaces["tasks show old-task --json"])["definition"]["action"] == [
        {"crm.echo": {"text": "key ***"}}]


def test_masking_is_idempotent_and_a_definition_is_stored_as_masked_once(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Masking what is masked changes nothing: a definition read back from the store and masked
    again (by `tasks show`, or a later write) is the one stored, so the digests serve and resume
    compute from stored definitions do not move. Only the known secrets change a definition: a
    value that merely looks secret (a 40-hex commit id, a `token:` param written as a template)
    is code the task needs when it fires."""
    from chainlang.store.redaction import StoreRedaction
    from chainlang.tasks.stored import project_store

    monkeypatch.setenv("B1_MODEL_KEY", MODEL_KEY)
    monkeypatch.setenv("CRM_TOKEN", CRM_TOKEN)
    project = make_project(tmp_path / "p")
    commit = "0123456789abcdef0123456789abcdef01234567"
    definition = {"schedule": {"type": "delay", "interval": "1h"}, "misfire": "once",
                  "action": [{"git.tag": {"commit": commit, "token": "{inputs.token}",
                                          "note": f"{MODEL_KEY}{CRM_TOKEN} password=x"}}],
                  "captured": {"inputs.token": CRM_TOKEN}, "description": f"tag with password={PASSWORD}"}
    with project_store(project) as store:
        stored = store.add_task("schedule", definition, id="tag").definition
        assert stored["action"] == [{"git.tag": {"commit": commit, "token": "{inputs.token}",
                                                 "note": "*** password=x"}}]
        assert stored["captured"] == {"inputs.token": "***"}
        assert stored["description"] == "tag with password=***"
        redaction = store.redaction
        assert redaction.task(stored) == stored
        assert store.get_task("tag").definition == stored
    samples: list[Any] = [definition, {"a": [f"x{MODEL_KEY}y", {"token": "t", MODEL_KEY: 1}], "password": "p"},
                          f"api_key: sk-{'a' * 20} {CRM_TOKEN}{CRM_TOKEN}", "a" * 40 + "1", 1234, None]
    for value in samples:
        for mask in (redaction.task, redaction.data, redaction.definition):
            once = mask(value)
            assert mask(once) == once, (mask, value)
    assert repr(StoreRedaction(SECRETS)) == "StoreRedaction(2 known secret(s))"  # never the values


def test_the_emit_payload_is_kept_masked_and_a_repeat_reads_that(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`claim_emit` and serve's `emit_batch` keep the payload masked: the known secrets and the
    secret-looking values (`password=...`, the value of a key that names a secret)."""
    from chainlang.tasks.stored import project_store

    monkeypatch.setenv("B1_MODEL_KEY", MODEL_KEY)
    monkeypatch.setenv("CRM_TOKEN", CRM_TOKEN)
    project = make_project(tmp_path / "p")
    payload = {"note": f"{MODEL_KEY}", "auth": f"password={PASSWORD}", "api_key": "plain"}
    masked = {"note": "***", "auth": "password=***", "api_key": "***"}
    with project_store(project) as store:
        first = store.claim_emit("one", "crm.update", "r1", "t1.jsonl", payload)
        assert first.new and first.data == payload  # the live emit fires with what it was given
        assert store.get_emit("one").data == masked
        (batched,) = store.emit_batch([("two", "crm.update", "r2", "t2.jsonl", payload)], [])
        assert batched.new and store.get_emit("two").data == masked
        assert store.claim_emit("two", "crm.update", "r3", "t3.jsonl", payload).data == masked  # a repeat
    assert PASSWORD not in store_dump(project) and not leaks(store_dump(project))

