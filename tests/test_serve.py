"""`chainlang serve` end to end (LANGUAGE.md §12): a real serve on loopback, started in a
project's directory by the CLI, driven over HTTP (httpx) and by `chainlang emit --to URL`.

The projects are built in temporary directories with the tools module of
tests/hooks_util.py (`hk_tools.py`, named by `tools = [...]` in chainlang.toml): its tools
log what they do to `.chainlang/state/log.jsonl`, so a test sees whether (and how often)
an action really ran. Most tests share one serve (a module-scoped fixture; each serve
start costs about a second); a test that stops its serve, or needs a project of its own,
starts one. Every serve is killed at its test's (or the module's) end, whatever happened.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.helpers import clean_env, command
from tests.hooks_util import labels, log, records, write, write_tools
from tests.serve_util import (  # noqa: F401  (servers: a fixture)
    Server,
    Servers,
    env_with,
    run,
    run_many,
    servers,
    show,
    wait_until,
)

EVENTS = """\
events:
  email.received:
    description: A message arrived in the inbox.
    payload:
      type: object
      properties:
        sender: {type: string}
        subject: {type: string}
        body: {type: string}
        size: {type: integer}
      required: [sender, subject]
  deploy.done:
    description: A deployment ended.
    payload:
      type: object
      properties: {service: {type: string}, ok: {type: boolean}}
      required: [service, ok]
  metrics.ping:
    description: Nothing hooks it (the metrics test counts it).
    payload: {type: object, properties: {n: {type: integer}}}
  slow.job:
    description: A job whose action takes a while.
    payload:
      type: object
      properties: {label: {type: string}, seconds: {type: number}}
      required: [label, seconds]
  held.job:
    description: A job whose action waits until a file appears in the state directory.
    payload:
      type: object
      properties: {label: {type: string}, marker: {type: string}}
      required: [label, marker]
"""

HOOKS = """\
hooks:
  - id: log-all
    trigger: post:email.received
    action:
      - t.log: {label: "mail from {sender}: {subject}"}
  - id: deploy-ok
    trigger: post:deploy.done
    condition: ok == true
    action:
      - t.log: {label: "deployed {service}"}
  - id: deploy-broken
    trigger: post:deploy.done
    condition: ok == false
    action:
      - t.fail: {message: "{service} is broken"}
  - id: slow
    trigger: post:slow.job
    action:
      - t.log: {label: "before {label}"}
      - t.sleep: {seconds: "{seconds}", label: "{label}"}
  - id: held
    trigger: post:held.job
    action:
      - t.log: {label: "before {label}"}
      - t.wait: {name: "{marker}", label: "{label}"}
"""


def make_project(root: Path, toml: str = "", hooks: str = HOOKS) -> Path:
    """The tools module, chainlang.toml naming it (and `toml`), and inbox.hooks.yaml."""
    write_tools(root)
    write(root, "chainlang.toml", 'tools = ["hk_tools.py"]\n' + textwrap.dedent(toml))
    (root / "inbox.hooks.yaml").write_text(EVENTS + textwrap.dedent(hooks), encoding="utf-8")
    return root


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def count(project: Path, label: str) -> int:
    return labels(project).count(label)


def metric(server: Server, name: str, **labels_: str) -> float:
    """One sample of /metrics, read with the Prometheus client's own parser (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    reply = server.get("/metrics")
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain"), reply.text
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels_.items()):
                return float(sample.value)
    return 0.0


def emit_line(stdout: str) -> str:
    """`chainlang emit` output without the durations (they differ from run to run)."""
    return re.sub(r" in [0-9.]+ ?[a-zµ]+$", "", stdout, flags=re.MULTILINE)


def assert_json_error(reply: Any, code: int) -> dict[str, Any]:
    assert reply.status_code == code, f"{reply.status_code} {reply.text}"
    assert reply.headers["content-type"].startswith("application/json"), reply.headers
    body = reply.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], body
    assert "Traceback" not in reply.text
    return body


# -- the shared serve ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One serve of one project for the tests that do not stop it."""
    root = make_project(tmp_path_factory.mktemp("shared"))
    with Servers() as started:
        server = started.start(root, "--grace", "5s")
        yield server
        code = server.stop()
        assert code == 0, server.describe()
        assert server.stdout.rstrip().endswith("serve stopped"), server.describe()
        assert "Traceback" not in server.stderr, server.describe()


# -- POST /events/NAME ----------------------------------------------------------------------


def test_an_event_is_accepted_then_its_run_ends_ok(shared: Server) -> None:
    subject = unique("accepted")
    reply = shared.event("email.received", {"sender": "Sarah Lee", "subject": subject})
    assert reply.status_code == 202, reply.text
    body = reply.json()
    assert body["status"] == "accepted" and body["event"] == "email.received"
    assert body["run"] == f"/runs/{body['run_id']}"
    transcript = Path(body["transcript"])
    assert transcript.parent == shared.project / ".chainlang" / "runs" and transcript.name == f"{body['run_id']}.jsonl"
    info = shared.run_info(body["run_id"], until=lambda b: b["status"] != "running")
    assert info["status"] == "ok" and info["event"] == "email.received", info
    assert [(f["hook"], f["status"]) for f in info["fired"]] == [("log-all", "ok")]
    assert count(shared.project, f"mail from Sarah Lee: {subject}") == 1
    # the transcript's header carries the event and its data
    started = records(transcript)[0]
    assert started["type"] == "run_started"
    assert started["emit"]["event"] == "email.received"
    assert started["emit"]["data"] == {"sender": "Sarah Lee", "subject": subject}


def test_wait_answers_with_the_fired_hooks(shared: Server) -> None:
    subject = unique("waited")
    reply = shared.event("email.received", {"sender": "Tom", "subject": subject}, wait=True)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "ok" and body["event"] == "email.received"
    assert [(f["hook"], f["status"]) for f in body["fired"]] == [("log-all", "ok")]
    assert count(shared.project, f"mail from Tom: {subject}") == 1  # done by the time of the answer
    assert shared.run_info(body["run_id"])["status"] == "ok"


def test_a_failing_action_is_reported_and_serve_goes_on(shared: Server) -> None:
    reply = shared.event("deploy.done", {"service": "api", "ok": False}, wait=True)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "failed"
    assert [(f["hook"], f["status"]) for f in body["fired"]] == [("deploy-broken", "failed")]
    assert "api is broken" in json.dumps(body["fired"])
    assert shared.run_info(body["run_id"])["status"] == "failed"
    assert shared.get("/healthz").json()["status"] == "ok"


def test_the_same_idempotency_key_runs_once(shared: Server) -> None:
    key, subject = unique("key"), unique("once")
    data = {"sender": "Sarah Lee", "subject": subject}
    first = shared.event("email.received", data, key=key, wait=True)
    assert first.status_code == 200 and first.json()["status"] == "ok", first.text
    second = shared.event("email.received", data, key=key, wait=True)
    assert second.status_code == 200, second.text
    again = second.json()
    assert again["status"] == "duplicate"
    assert again["previous"]["run_id"] == first.json()["run_id"] and again["previous"]["status"] == "ok"
    third = shared.event("email.received", data, key=key)  # without wait too
    assert third.status_code == 200 and third.json()["status"] == "duplicate", third.text
    assert count(shared.project, f"mail from Sarah Lee: {subject}") == 1


def test_keys_posted_at_the_same_time_run_once(shared: Server) -> None:
    key, subject = unique("race"), unique("race")
    data = {"sender": "Ann", "subject": subject}
    with ThreadPoolExecutor(max_workers=6) as pool:
        replies = list(pool.map(lambda _i: shared.event("email.received", data, key=key, wait=True), range(6)))
    statuses = sorted(r.json()["status"] for r in replies)
    assert statuses == ["duplicate"] * 5 + ["ok"], [r.text for r in replies]
    assert count(shared.project, f"mail from Ann: {subject}") == 1


# -- bad input ----------------------------------------------------------------------------------


def _nested(depth: int) -> str:
    return '{"sender": "x", "subject": "y", "size": ' + "[" * depth + "]" * depth + "}"


BAD = [
    # (what, event, body, headers, code, in the error)
    ("malformed JSON", "email.received", b'{"sender": ', {}, 400, "not JSON"),
    ("NaN is not JSON", "email.received", b'{"sender": NaN, "subject": "x"}', {}, 400, "not JSON"),
    ("a number too large for a float", "slow.job", b'{"label": "x", "seconds": 1e999}', {}, 400, "too large"),
    ("not UTF-8", "email.received", b'{"sender": "\xff\xfe", "subject": "x"}', {}, 400, "not JSON"),
    ("empty body", "email.received", b"", {}, 400, "not JSON"),
    ("a JSON array", "email.received", b"[1, 2]", {}, 422, "must be a JSON object"),
    ("a JSON string", "email.received", b'"hello"', {}, 422, "must be a JSON object"),
    ("null", "email.received", b"null", {}, 422, "must be a JSON object"),
    ("unknown event", "email.recieved", b"{}", {}, 404, "did you mean email.received?"),
    ("a standard event that is not external", "user.notify", b'{"message": "x"}', {}, 400, "not an external event"),
    ("task.due", "task.due", b'{"task_id": "t", "due_at": "2026-01-01T00:00:00Z", "late_ms": 0}', {}, 400,
     "cannot be emitted"),
    ("too large", "email.received",
     json.dumps({"sender": "x", "subject": "y" * (1024 * 1024 + 10)}).encode(), {}, 413, "larger than"),
    ("nested deeper than the limit", "email.received", _nested(70).encode(), {}, 400, "nests deeper"),
    ("nested deeper than the parser", "email.received", _nested(100_000).encode(), {}, 400, ""),
    ("a key with a control character", "email.received", b'{"sender": "x", "subject": "y"}',
     {"Idempotency-Key": "a\tb"}, 400, "control character"),
    ("a key too long", "email.received", b'{"sender": "x", "subject": "y"}',
     {"Idempotency-Key": "k" * 201}, 400, "at most"),
    ("an empty key", "email.received", b'{"sender": "x", "subject": "y"}', {"Idempotency-Key": ""}, 400, "empty"),
    ("a body that is not the gzip it says", "email.received", b'{"sender": "x", "subject": "y"}',
     {"Content-Encoding": "gzip"}, 400, "could not be read"),
    ("a key that is not UTF-8", "email.received", b'{"sender": "x", "subject": "y"}',
     {"Idempotency-Key": b"caf\xe9"}, 400, ""),
]


@pytest.mark.parametrize("what,event,body,headers,code,says", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_with_a_json_error(shared: Server, what: str, event: str, body: bytes,
                                                 headers: dict[str, Any], code: int, says: str) -> None:
    before = len(list((shared.project / ".chainlang" / "runs").glob("*.jsonl")))
    reply = shared.post(f"/events/{event}", content=body, headers={"Content-Type": "application/json", **headers})
    answer = assert_json_error(reply, code)
    assert says in answer["error"] or says in json.dumps(answer.get("errors")), answer
    assert shared.alive() and shared.get("/healthz").status_code == 200, shared.describe()
    assert "Traceback" not in shared.stderr, shared.describe()
    assert len(list((shared.project / ".chainlang" / "runs").glob("*.jsonl"))) == before  # nothing ran


def test_a_payload_with_a_lone_surrogate_is_taken_as_a_local_emit_takes_it(shared: Server) -> None:
    subject = unique("surrogate")
    body = '{"sender": "\\ud800 Sarah", "subject": "%s"}' % subject
    reply = shared.post("/events/email.received?wait=1", content=body.encode(), headers={"Content-Type": "application/json"})
    assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text


def test_a_payload_that_does_not_match_gives_422_with_the_errors(shared: Server) -> None:
    reply = shared.event("email.received", {"sender": 42, "size": "big"})
    body = assert_json_error(reply, 422)
    errors = body["errors"]
    assert any("'subject' is a required property" in e for e in errors), errors
    assert any(e.startswith("sender:") and "not of type 'string'" in e for e in errors), errors
    assert any(e.startswith("size:") for e in errors), errors


def test_other_routes_and_methods_answer_json(shared: Server) -> None:
    assert_json_error(shared.get("/nowhere"), 404)
    assert_json_error(shared.get("/events/email.received"), 405)
    assert_json_error(shared.post("/runs/x"), 405)
    # a request line too long for the HTTP parser: aiohttp's own 400 (not JSON), and no traceback
    assert shared.post("/events/" + "x" * 10_000, json={}).status_code == 400
    assert shared.alive() and "Traceback" not in shared.stderr, shared.describe()


# -- GET /healthz, /metrics, /runs/ID ---------------------------------------------------------------


def test_healthz(shared: Server) -> None:
    reply = shared.get("/healthz")
    assert reply.status_code == 200
    body = reply.json()
    assert body["status"] == "ok" and isinstance(body["running"], int) and isinstance(body["firing"], int), body


def test_metrics_count_what_was_sent(shared: Server) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    duplicates = metric(shared, "chainlang_events_duplicate_total")
    invalid = metric(shared, "chainlang_events_rejected_total", reason="invalid")
    key = unique("ping")
    for n in range(3):
        assert shared.event("metrics.ping", {"n": n}, wait=True).status_code == 200
    assert shared.event("metrics.ping", {"n": 9}, key=key, wait=True).json()["status"] == "ok"
    assert shared.event("metrics.ping", {"n": 9}, key=key, wait=True).json()["status"] == "duplicate"
    assert shared.event("metrics.ping", {"n": "nine"}).status_code == 422
    assert metric(shared, "chainlang_events_total", event="metrics.ping", status="ok") == 4
    assert metric(shared, "chainlang_events_duplicate_total") == duplicates + 1
    assert metric(shared, "chainlang_events_rejected_total", reason="invalid") == invalid + 1
    names = {family.name for family in text_string_to_metric_families(shared.get("/metrics").text)}
    for name in ("chainlang_events", "chainlang_hook_firings", "chainlang_task_runs", "chainlang_failures",
                 "chainlang_steps", "chainlang_event_duration_seconds", "chainlang_tasks_due", "chainlang_running"):
        assert name in names, names


def test_runs_unknown_and_no_traversal(shared: Server) -> None:
    secret = shared.project / ".chainlang" / "secret.jsonl"
    secret.write_text('{"seq": 1, "type": "run_started", "secret": "do not show"}\n', encoding="utf-8")
    for path in ("/runs/unknown", "/runs/..", "/runs/..%2Fsecret", "/runs/%2e%2e%2fsecret", "/runs/.hidden",
                 "/runs/..%2F..%2F..%2Fetc%2Fpasswd", "/runs/x%00y", "/runs/" + "a" * 300):
        reply = shared.get(path)
        if path == "/runs/..":  # the client makes it "/": the page of runs, no file
            assert reply.status_code == 200 and "<title>runs · chainlang serve</title>" in reply.text
        else:
            assert reply.status_code == 404, (path, reply.status_code, reply.text)
        assert "do not show" not in reply.text and "root:" not in reply.text
    # the path sent as is, dots and all (httpx would normalise it)
    host, port = shared.url.removeprefix("http://").rsplit(":", 1)
    for raw in ("/runs/../../etc", "/runs/../secret", "/runs/..%2F..%2Fetc%2Fpasswd"):
        with socket.create_connection((host, int(port)), timeout=10) as conn:
            conn.sendall(f"GET {raw} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        head = answer.split(b"\r\n", 1)[0]
        assert b" 404 " in head, (raw, answer[:300])
        assert b"do not show" not in answer and b"root:" not in answer


# -- chainlang emit --to URL ------------------------------------------------------------------------


def _both(server: Server, *args: str) -> tuple[Any, Any]:
    """`chainlang emit ARGS` locally and `chainlang emit ARGS --to URL`, in the serve's project."""
    local, remote = run_many((server.project, ("emit", *args), None),
                             (server.project, ("emit", *args, "--to", server.url), None))
    return local, remote


def test_emit_to_prints_what_a_local_emit_prints(shared: Server) -> None:
    subject = unique("parity")
    data = json.dumps({"sender": "Sarah Lee", "subject": subject})
    local, remote = _both(shared, "email.received", "--data", data)
    assert local.returncode == remote.returncode == 0, show(local) + show(remote)
    assert emit_line(remote.stdout) == emit_line(local.stdout) == "emit email.received: 1 hook fired\n  ✓ log-all ok\n"
    assert "Traceback" not in remote.stderr
    assert count(shared.project, f"mail from Sarah Lee: {subject}") == 2
    # no hook fired
    local, remote = _both(shared, "metrics.ping", "--data", "{}")
    assert local.returncode == remote.returncode == 0
    assert remote.stdout == local.stdout == "emit metrics.ping: no hook fired\n"
    # an action failed: exit 1, the same lines
    local, remote = _both(shared, "deploy.done", "--data", '{"service": "db", "ok": false}')
    assert local.returncode == remote.returncode == 1, show(local) + show(remote)
    assert emit_line(remote.stdout) == emit_line(local.stdout), show(local) + show(remote)
    assert "✗ deploy-broken failed: RuntimeError: db is broken" in remote.stdout


@pytest.mark.parametrize("args,code,says", [
    (("email.received", "--data", '{"sender": 1}'), 1, "does not match the payload declared"),
    (("email.received", "--data", "[1]"), 1, "must be a JSON object"),
    (("email.recieved", "--data", "{}"), 2, "did you mean email.received?"),
    (("task.due", "--data", "{}"), 2, "cannot be emitted"),
    (("email.received", "--data", "{nope"), 2, "--data: not JSON"),
    (("email.received", "--data", '{"sender": "x", "subject": "y"}', "--id", "a\tb"), 2, "control character"),
    (("email.received", "--data", '{"sender": "x", "subject": "y"}', "--id", "a\nb"), 2, "control character"),
], ids=["invalid data", "not an object", "unknown event", "task.due", "malformed --data", "bad --id", "newline --id"])
def test_emit_to_exits_as_a_local_emit(shared: Server, args: tuple[str, ...], code: int, says: str) -> None:
    local, remote = _both(shared, *args)
    assert local.returncode == code and remote.returncode == code, show(local) + show(remote)
    assert says in local.stderr and says in remote.stderr, show(local) + show(remote)
    assert remote.stdout == local.stdout == ""
    assert "Traceback" not in local.stderr + remote.stderr


def test_emit_to_refuses_a_number_too_large_for_json(shared: Server) -> None:
    proc = run(shared.project, "emit", "slow.job", "--data", '{"label": "x", "seconds": -1e999}', "--to", shared.url)
    assert proc.returncode == 2 and "--data: not JSON" in proc.stderr and "is too large" in proc.stderr, show(proc)


def test_a_local_emit_refuses_a_number_too_large_for_json(tmp_path: Path) -> None:
    make_project(tmp_path)
    proc = run(tmp_path, "emit", "slow.job", "--data", '{"label": "x", "seconds": 1e999}')
    assert proc.returncode == 2 and "internal error" not in proc.stderr, show(proc)
    assert not list((tmp_path / ".chainlang" / "runs").glob("*")), "a transcript was left behind"


def test_emit_to_an_unreachable_or_bad_url_exits_2(shared: Server) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for url, says in ((f"http://127.0.0.1:{port}", "cannot reach serve"), ("ftp://example.org", "base URL"),
                      ("127.0.0.1:8765", "base URL"), ("http://[::1", "not a URL"), ("http://127.0.0.1:99999", "not a URL"),
                      ("http://:8765", "base URL"), (shared.url + "/?wait=0", "base URL")):
        proc = run(shared.project, "emit", "metrics.ping", "--data", "{}", "--to", url)
        assert proc.returncode == 2 and says in proc.stderr, show(proc)
        assert "Traceback" not in proc.stderr
    proc = run(shared.project, "emit", "metrics.ping", "--no-wait")
    assert proc.returncode == 2 and "--no-wait goes with --to" in proc.stderr, show(proc)
    proc = run(shared.project, "emit", "metrics.ping", "--to", shared.url, "--now", "2026-01-01T00:00:00Z")
    assert proc.returncode == 2 and "--to posts to a serve" in proc.stderr, show(proc)


def test_emit_to_json_id_and_no_wait(shared: Server) -> None:
    key, subject = unique("cli-key"), unique("cli")
    data = json.dumps({"sender": "Sarah Lee", "subject": subject})
    local = run(shared.project, "emit", "email.received", "--data", data, "--json")
    remote = run(shared.project, "emit", "email.received", "--data", data, "--json", "--id", key, "--to", shared.url)
    assert local.returncode == remote.returncode == 0, show(local) + show(remote)
    mine, theirs = json.loads(local.stdout), json.loads(remote.stdout)
    assert set(theirs) == set(mine), (mine, theirs)
    assert theirs["status"] == "ok" and theirs["event"] == "email.received"
    assert [(f["hook"], f["status"]) for f in theirs["fired"]] == [("log-all", "ok")]
    assert Path(theirs["transcript"]).is_file()
    # the same --id again: nothing runs, as a local emit says
    again = run(shared.project, "emit", "email.received", "--data", data, "--id", key, "--to", shared.url)
    assert again.returncode == 0, show(again)
    assert again.stdout == "" and "already processed" in again.stderr
    assert f"run {theirs['run_id']} (ok)" in again.stderr
    as_json, local_json = run_many((shared.project, ("emit", "email.received", "--data", data, "--id", key, "--json",
                                                     "--to", shared.url), None),
                                   (shared.project, ("emit", "email.received", "--data", data, "--id", key, "--json"),
                                    None))
    assert as_json.returncode == local_json.returncode == 0, show(as_json) + show(local_json)
    duplicate = json.loads(as_json.stdout)
    assert duplicate["status"] == "duplicate" and duplicate["previous"]["run_id"] == theirs["run_id"], duplicate
    assert duplicate == json.loads(local_json.stdout)  # what a local emit --json prints, to the letter
    assert count(shared.project, f"mail from Sarah Lee: {subject}") == 2  # the local one and the first post
    # --no-wait: once serve recorded it
    later = unique("later")
    quick = run(shared.project, "emit", "email.received", "--data",
                json.dumps({"sender": "Sarah Lee", "subject": later}), "--no-wait", "--to", shared.url)
    assert quick.returncode == 0, show(quick)
    found = re.fullmatch(r"emit email\.received: recorded by serve as run (\S+) \(/runs/(\S+)\)\n", quick.stdout)
    assert found and found.group(1) == found.group(2), show(quick)
    assert shared.run_info(found.group(1), until=lambda b: b["status"] != "running")["status"] == "ok"
    wait_until("the no-wait event's action ran", lambda: count(shared.project, f"mail from Sarah Lee: {later}") == 1)
    quiet = run(shared.project, "emit", "metrics.ping", "--data", "{}", "--no-wait", "--json", "--to", shared.url)
    assert quiet.returncode == 0, show(quiet)
    assert json.loads(quiet.stdout)["status"] in ("accepted", "ok")


def test_emit_to_and_a_local_emit_share_a_non_ascii_id(shared: Server) -> None:
    key, subject = unique("clé-été"), unique("accents")
    data = json.dumps({"sender": "Zoë", "subject": subject})
    remote = run(shared.project, "emit", "email.received", "--data", data, "--id", key, "--to", shared.url)
    assert remote.returncode == 0 and "1 hook fired" in remote.stdout, show(remote)
    local = run(shared.project, "emit", "email.received", "--data", data, "--id", key)
    assert local.returncode == 0 and "already processed" in local.stderr, show(local)
    again = shared.event("email.received", json.loads(data), key=None, wait=True)  # no key: runs
    assert again.json()["status"] == "ok"
    raw = shared.post("/events/email.received?wait=1", content=data.encode(),
                      headers={"Idempotency-Key": key.encode("utf-8"), "Content-Type": "application/json"})
    assert raw.json()["status"] == "duplicate", raw.text
    assert count(shared.project, f"mail from Zoë: {subject}") == 2


# -- refusing to start ------------------------------------------------------------------------------


def test_hooks_with_errors_stop_serve_from_starting(tmp_path: Path) -> None:
    make_project(tmp_path, hooks="""\
        hooks:
          - id: bad
            trigger: post:email.received
            action:
              - no.such.tool: {x: 1}
    """)
    proc = run(tmp_path, "serve", "--port", "0", timeout=30)
    assert proc.returncode == 2, show(proc)
    assert "hooks have errors" in proc.stderr and "inbox.hooks.yaml:" in proc.stderr, show(proc)
    assert "no.such.tool" in proc.stderr
    assert "serving" not in proc.stdout and "Traceback" not in proc.stderr


def test_bad_options_stop_serve_from_starting(tmp_path: Path) -> None:
    make_project(tmp_path)
    cases = ((("--grace", "forever"), "--grace forever"), (("--grace", "2h"), "--grace 2h"),
             (("--host", "0.0.0.0"), "only with a bearer token"), (("--host", "192.0.2.1"), "only with a bearer token"))
    procs = run_many(*((tmp_path, ("serve", "--port", "0", *args), None) for args, _ in cases), timeout=30)
    for (_, says), proc in zip(cases, procs):
        assert proc.returncode == 2 and says in proc.stderr, show(proc)
        assert "Traceback" not in proc.stderr


def test_a_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    make_project(tmp_path)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        proc = run(tmp_path, "serve", "--port", str(sock.getsockname()[1]), timeout=30)
    assert proc.returncode == 2 and "cannot listen on 127.0.0.1:" in proc.stderr, show(proc)
    assert "Traceback" not in proc.stderr


# -- the bearer token -------------------------------------------------------------------------------


def test_token_env_set_but_unset_variable_refuses_to_start(tmp_path: Path) -> None:
    make_project(tmp_path, '[serve]\ntoken_env = "MY_TOKEN"\n')
    unset, empty, blank, control = run_many(
        *((tmp_path, ("serve", "--port", "0"), env_with(MY_TOKEN=value)) for value in (None, "", "  \t", "a\x01b")),
        timeout=30)
    for proc in (unset, empty, blank):
        assert proc.returncode == 2, show(proc)
        assert "token_env names MY_TOKEN, but that variable is not set" in proc.stderr, show(proc)
    assert control.returncode == 2 and "has a control character" in control.stderr, show(control)
    assert not any("Traceback" in p.stderr or "serving" in p.stdout for p in (unset, empty, blank, control))


def test_a_token_guards_every_request(tmp_path: Path, servers: Servers) -> None:
    make_project(tmp_path, '[serve]\ntoken_env = "MY_TOKEN"\n')
    token = "s3cret-" + uuid.uuid4().hex
    env = env_with(MY_TOKEN=f"  {token}\n")  # blanks around it are not part of it
    server = servers.start(tmp_path, "--host", "0.0.0.0", env=env, token=token)  # a token allows any address
    assert "token required" in server.stdout
    import httpx

    data = {"sender": "Sarah Lee", "subject": "guarded"}
    bare = httpx.Client(base_url=server.url, timeout=10)  # no token of its own
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {token}x"},
                    {"Authorization": token}, {"Authorization": f"Basic {token}"}, {"Authorization": b"Bearer \xc3\xa9"},
                    {"Authorization": b"Bearer \xff"}):
        for method, path in (("POST", "/events/email.received"), ("GET", "/healthz"), ("GET", "/metrics"),
                             ("GET", "/runs/x")):
            reply = bare.request(method, path, json=data if method == "POST" else None, headers=headers)
            body = assert_json_error(reply, 401)
            assert "bearer token" in body["error"] and reply.headers.get("www-authenticate") == "Bearer"
            assert token not in reply.text
    bare.close()
    assert labels(tmp_path) == []  # nothing ran
    reply = server.event("email.received", data, wait=True)
    assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text
    # emit --to sends the token [serve] token_env names
    sent = run(tmp_path, "emit", "email.received", "--data", json.dumps(data), "--to", server.url, env=env)
    assert sent.returncode == 0, show(sent)
    assert emit_line(sent.stdout) == "emit email.received: 1 hook fired\n  ✓ log-all ok\n"
    refused = run(tmp_path, "emit", "email.received", "--data", json.dumps(data), "--to", server.url,
                  env=env_with(MY_TOKEN="wrong"))
    assert refused.returncode == 2 and "(401)" in refused.stderr and "bearer token" in refused.stderr, show(refused)
    assert labels(tmp_path) == ["mail from Sarah Lee: guarded"] * 2
    assert metric(server, "chainlang_events_rejected_total", reason="unauthorized") == 7 * 4 + 1


# -- the hooks change while serving -----------------------------------------------------------------


def test_a_hooks_file_changed_while_serving(tmp_path: Path, servers: Servers) -> None:
    make_project(tmp_path)
    server = servers.start(tmp_path)
    assert server.event("metrics.ping", {}, wait=True).json()["fired"] == []
    hooks = tmp_path / "inbox.hooks.yaml"
    hooks.write_text(hooks.read_text(encoding="utf-8") + "  - id: pings\n    trigger: post:metrics.ping\n"
                     "    action:\n      - t.log: {label: \"ping {n}\"}\n", encoding="utf-8")
    wait_until("the new hook is in force", lambda: server.event("metrics.ping", {"n": 1}, wait=True).json().get("fired"),
               server=server)
    assert "ping 1" in labels(tmp_path)
    # broken: events get 503 with the diagnostics, and serve goes on
    hooks.write_text(hooks.read_text(encoding="utf-8") + "      - no.such.tool: {}\n", encoding="utf-8")
    wait_until("the broken hooks are noticed", lambda: server.event("metrics.ping", {"n": 2}).status_code == 503,
               server=server)
    body = assert_json_error(server.event("metrics.ping", {"n": 2}), 503)
    assert "hooks have errors" in body["error"] and any("no.such.tool" in d for d in body["diagnostics"]), body
    sent = run(tmp_path, "emit", "metrics.ping", "--data", "{}", "--to", server.url)
    assert sent.returncode == 1 and "cannot take it now" in sent.stderr and "no.such.tool" in sent.stderr, show(sent)
    hooks.write_text(EVENTS + HOOKS, encoding="utf-8")
    wait_until("fixed again", lambda: server.event("metrics.ping", {"n": 3}).status_code in (200, 202), server=server)
    assert server.stop() == 0, server.describe()
    assert "Traceback" not in server.stderr


# -- SIGTERM ----------------------------------------------------------------------------------------


def _slow(server: Server, label: str, key: str | None = None, seconds: float = 1.5) -> dict[str, Any]:
    reply = server.event("slow.job", {"label": label, "seconds": seconds}, key=key)
    assert reply.status_code == 202, reply.text
    wait_until(f"{label} started", lambda: f"{label}:start" in labels(server.project), server=server)
    return dict(reply.json())


@pytest.mark.slow
def test_sigterm_lets_a_running_action_finish_within_the_grace(tmp_path: Path, servers: Servers) -> None:
    make_project(tmp_path)
    server = servers.start(tmp_path, "--grace", "5s")
    accepted = _slow(server, "drained", key="job-drained")
    running = server.get(f"/runs/{accepted['run_id']}").json()
    assert running["status"] == "running" and running["event"] == "slow.job", running
    with ThreadPoolExecutor(max_workers=1) as pool:  # and one whose sender waits for its actions
        waiting = pool.submit(server.event, "slow.job", {"label": "waited", "seconds": 1.0}, None, True)
        wait_until("the waited one started", lambda: "waited:start" in labels(tmp_path), server=server)
        server.send()
        # stopping: no new events, /healthz says so
        wait_until("stopping refuses events", lambda: server.event("metrics.ping", {}).status_code == 503,
                   server=server)
        assert assert_json_error(server.event("metrics.ping", {}), 503)["error"].startswith("serve is stopping")
        assert server.get("/healthz").json()["status"] == "stopping"
        answer = waiting.result(timeout=30)
    assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    assert server.stop() == 0, server.describe()
    assert server.stdout.splitlines()[-1] == "serve stopped", server.describe()
    assert sorted(labels(tmp_path)) == ["before drained", "before waited", "drained:end", "drained:start",
                                        "waited:end", "waited:start"]
    recs = records(Path(accepted["transcript"]))
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "ok", recs[-1]
    assert "interrupted" not in server.stderr
    # the store recorded the emit's end: a next serve has nothing to take up, the key is a duplicate
    again = servers.start(tmp_path)
    reply = again.event("slow.job", {"label": "drained", "seconds": 1.5}, key="job-drained")
    assert reply.json()["status"] == "duplicate" and reply.json()["previous"]["status"] == "ok", reply.text
    assert "took up" not in again.stderr


@pytest.mark.slow
def test_sigterm_past_the_grace_interrupts_and_the_next_serve_resumes(tmp_path: Path, servers: Servers) -> None:
    make_project(tmp_path)
    server = servers.start(tmp_path, "--grace", "0.2s")
    # the sender waits for the actions (emit --to without --no-wait), and hears that they were cut
    sender = subprocess.Popen(command("emit", "slow.job", "--data", '{"label": "cut", "seconds": 1.5}', "--id",
                                      "job-cut", "--to", server.url), cwd=tmp_path, env=clean_env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until("the action started", lambda: "cut:start" in labels(tmp_path), server=server)
        assert server.stop() == 0, server.describe()
        out, err = sender.communicate(timeout=30)
    finally:
        if sender.poll() is None:
            sender.kill()
            sender.communicate()
    assert sender.returncode == 1 and out == "", (out, err)
    assert err.startswith("emit slow.job interrupted: ") and "the next serve resumes them" in err, err
    assert server.stdout.splitlines()[-1] == "serve stopped", server.describe()
    assert "interrupted 1 event(s)" in server.stderr, server.describe()
    (transcript,) = (tmp_path / ".chainlang" / "runs").glob("*.jsonl")
    run_id = transcript.stem
    recs = records(transcript)
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "interrupted", recs[-1]
    assert labels(tmp_path) == ["before cut", "cut:start"]
    from chainlang.tasks.stored import project_store

    with project_store(tmp_path) as store:
        claim = store.get_emit("job-cut")
        assert claim is not None and claim.status == "started" and claim.run_id == run_id
    # the next serve resumes it where it stopped: the step that ended is not run again
    again = servers.start(tmp_path)
    wait_until("the resumed action ended", lambda: "cut:end" in labels(tmp_path), server=again)
    assert labels(tmp_path) == ["before cut", "cut:start", "cut:start", "cut:end"]
    info = again.run_info(run_id, until=lambda b: b["status"] != "running")
    assert info["status"] == "ok", info
    assert records(transcript)[-1]["status"] == "ok"
    with project_store(tmp_path) as store:
        claim = store.get_emit("job-cut")
        assert claim is not None and claim.status == "ok" and claim.finished_at, claim
    reply = again.event("slow.job", {"label": "cut", "seconds": 1.5}, key="job-cut", wait=True)
    assert reply.json()["status"] == "duplicate" and reply.json()["previous"]["status"] == "ok", reply.text
    assert again.stop() == 0
    assert labels(tmp_path).count("cut:end") == 1
    assert "took up the emits a stopped serve left: 1 resumed" in again.stderr, again.describe()


def test_serve_listens_while_it_resumes_what_a_stopped_serve_left(tmp_path: Path, servers: Servers) -> None:
    make_project(tmp_path)
    first = servers.start(tmp_path, "--grace", "0.1s")
    reply = first.event("held.job", {"label": "held", "marker": "go"}, key="held-1")
    assert reply.status_code == 202, reply.text
    run_id = reply.json()["run_id"]
    wait_until("the action waits", lambda: "held:start" in labels(tmp_path), server=first)
    assert first.stop() == 0 and "interrupted 1 event(s)" in first.stderr, first.describe()
    # the next serve answers while the action it resumed still waits (for the file the test makes)
    second = servers.start(tmp_path, "--grace", "0.1s")
    wait_until("the action resumed", lambda: labels(tmp_path).count("held:start") == 2, server=second)
    assert second.get("/healthz").json()["running"] == 1
    assert second.get(f"/runs/{run_id}").json()["status"] == "running"
    again = second.event("held.job", {"label": "held", "marker": "go"}, key="held-1")
    assert again.status_code == 200 and again.json()["status"] == "duplicate", again.text
    assert again.json()["previous"]["run_id"] == run_id
    # stopped while resuming: cut again, and taken up again by the serve after
    assert second.stop() == 0 and "interrupted 1 event(s)" in second.stderr, second.describe()
    assert records(Path(reply.json()["transcript"]))[-1]["status"] == "interrupted"
    third = servers.start(tmp_path)
    wait_until("the action resumed again", lambda: labels(tmp_path).count("held:start") == 3, server=third)
    (tmp_path / ".chainlang" / "state" / "go").write_text("go", encoding="utf-8")
    assert third.run_info(run_id, until=lambda b: b["status"] != "running")["status"] == "ok"
    wait_until("the resumption reported", lambda: "took up the emits a stopped serve left: 1 resumed" in third.stderr,
               server=third)
    assert labels(tmp_path) == ["before held", "held:start", "held:start", "held:start", "held:end"]
    assert third.stop() == 0, third.describe()
    assert not any("Traceback" in s.stderr for s in (first, second, third))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_stops_at_once_and_records_the_cut(tmp_path: Path, servers: Servers, sig: int) -> None:
    make_project(tmp_path)
    server = servers.start(tmp_path)  # the default grace: 30 s
    accepted = _slow(server, "long", seconds=20)
    server.send(sig)
    wait_until("the drain began", lambda: "signal again to stop now" in server.stderr, server=server)
    server.proc.send_signal(sig)
    # at once: well inside the 30 s grace and the 20 s step (stop fails the test past 10 s)
    assert server.stop(timeout=10) == 0, server.describe()
    assert server.stdout.splitlines()[-1] == "serve stopped", server.describe()
    assert "interrupted 1 event(s) and 0 firing(s) on a second signal" in server.stderr, server.describe()
    assert "Traceback" not in server.stderr
    recs = records(Path(accepted["transcript"]))
    assert recs[-1]["type"] == "run_finished" and recs[-1]["status"] == "interrupted", recs[-1]
    assert labels(tmp_path) == ["before long", "long:start"]


# -- scheduled tasks ----------------------------------------------------------------------------------


def _schedule(project: Path, name: str, spec: str) -> str:
    """Run a chain that schedules a task (`spec`: the task.schedule params); its task id."""
    write(project, f"{name}.chain.yaml", "steps:\n  - task.schedule:\n" + textwrap.indent(textwrap.dedent(spec), "      ")
          + "outputs:\n  task_id: \"{task.schedule.task_id}\"\n")
    ran = run(project, "run", f"{name}.chain.yaml", "--json")
    assert ran.returncode == 0, show(ran)
    return str(json.loads(ran.stdout)["task_id"])


def _task(project: Path, task_id: str) -> dict[str, Any]:
    shown = run(project, "tasks", "show", task_id, "--json")
    assert shown.returncode == 0, show(shown)
    return dict(json.loads(shown.stdout))


@pytest.mark.slow
def test_a_delayed_task_fires_once_in_real_time(tmp_path: Path, servers: Servers) -> None:
    make_project(tmp_path)
    before = time.time()
    task_id = _schedule(tmp_path, "later", """\
        type: delay
        interval: 1s
        action:
          - t.log: {label: "delayed"}
    """)
    assert _task(tmp_path, task_id)["status"] in ("pending", "active")  # not fired yet
    server = servers.start(tmp_path)
    wait_until("the task fired", lambda: count(tmp_path, "delayed") == 1, within=30, server=server)
    fired_at = [e["t"] for e in log(tmp_path) if e["label"] == "delayed"][0]
    assert fired_at >= before + 1.0  # not before it was due: a second after the chain ran
    wait_until("the task completed", lambda: _task(tmp_path, task_id)["status"] == "completed", server=server)
    listed = run(tmp_path, "tasks", "list", "--json")
    assert [(t["task_id"], t["status"]) for t in json.loads(listed.stdout)["tasks"]] == [(task_id, "completed")]
    task = _task(tmp_path, task_id)
    assert [r["status"] for r in task["runs"]] == ["ok"], task
    info = server.run_info(task["runs"][0]["run_id"])
    assert info["status"] == "ok" and info["event"] == "task.due" and info["task_id"] == task_id, info
    assert metric(server, "chainlang_task_runs_total", status="ok") == 1
    _scheduler_went_past_now(tmp_path, server)
    assert count(tmp_path, "delayed") == 1 and len(_task(tmp_path, task_id)["runs"]) == 1  # not fired again


@pytest.mark.slow
def test_a_task_scheduled_while_serving_fires_at_its_moment(tmp_path: Path, servers: Servers) -> None:
    from datetime import datetime

    make_project(tmp_path)
    server = servers.start(tmp_path)
    # by a chain run in another process, while serve runs; the moment is read against that run's
    # clock ("in 3s"), so a slow start of the command cannot put it in the past
    write(tmp_path, "once.chain.yaml", """\
        steps:
          - task.schedule:
              type: once
              at: in 3s
              action:
                - t.log: {label: "at its moment"}
        outputs:
          task_id: "{task.schedule.task_id}"
          next_run: "{task.schedule.next_run}"
        """)
    ran = run(tmp_path, "run", "once.chain.yaml", "--json")
    assert ran.returncode == 0, show(ran)
    task_id, due = json.loads(ran.stdout)["task_id"], datetime.fromisoformat(json.loads(ran.stdout)["next_run"])
    wait_until("the task fired", lambda: count(tmp_path, "at its moment") == 1, within=30, server=server)
    fired_at = [e["t"] for e in log(tmp_path) if e["label"] == "at its moment"][0]
    assert fired_at >= due.timestamp(), (fired_at - due.timestamp())  # not before its moment
    wait_until("the task completed", lambda: _task(tmp_path, task_id)["status"] == "completed", server=server)
    # fired for its moment: how late a loaded machine got there is serve's lateness metric, not a contract
    # tasks show --json gives moments to the millisecond
    assert [datetime.fromisoformat(r["due_at"]) for r in _task(tmp_path, task_id)["runs"]] == [
        due.replace(microsecond=due.microsecond // 1000 * 1000)]


@pytest.mark.slow
def test_a_firing_cut_by_sigterm_is_resumed_by_the_next_serve(tmp_path: Path, servers: Servers) -> None:
    make_project(tmp_path)
    task_id = _schedule(tmp_path, "nap", """\
        type: delay
        interval: 1s
        action:
          - t.log: {label: "first"}
          - t.sleep: {seconds: 1.5, label: "nap"}
    """)
    server = servers.start(tmp_path, "--grace", "0.2s")
    wait_until("the firing is under way", lambda: "nap:start" in labels(tmp_path), server=server)
    assert server.stop() == 0, server.describe()
    assert "interrupted 0 event(s) and 1 firing(s) past the grace period" in server.stderr, server.describe()
    task = _task(tmp_path, task_id)
    assert task["status"] in ("pending", "active") and [r["status"] for r in task["runs"]] == ["running"], task
    (run_,) = task["runs"]
    assert records(Path(run_["transcript"]))[-1]["status"] == "interrupted"
    again = servers.start(tmp_path)
    wait_until("the firing resumed and ended", lambda: "nap:end" in labels(tmp_path), server=again)
    wait_until("the task completed", lambda: _task(tmp_path, task_id)["status"] == "completed", server=again)
    assert labels(tmp_path) == ["first", "nap:start", "nap:start", "nap:end"]  # the step that ended ran once
    task = _task(tmp_path, task_id)
    assert [(r["run_id"], r["status"]) for r in task["runs"]] == [(run_["run_id"], "ok")], task  # the same run
    info = again.run_info(run_["run_id"])
    assert info["status"] == "ok" and info["task_id"] == task_id, info


def _scheduler_went_past_now(project: Path, server: Server) -> None:
    """Return once serve's scheduler has handled every moment due until now (and a second
    more): a task scheduled now for one second later has fired. A task that should not
    fire again has then had its chance, without sleeping for a guessed while."""
    barrier = _schedule(project, f"barrier-{time.monotonic_ns()}", f"""\
        type: delay
        interval: 1s
        action:
          - t.log: {{label: "barrier {time.monotonic_ns()}"}}
    """)
    wait_until("a later task fired", lambda: _task(project, barrier)["status"] == "completed", within=30,
               server=server)


@pytest.mark.slow
def test_a_repeating_task_fires_at_its_scheduled_moments(tmp_path: Path, servers: Servers) -> None:
    from datetime import datetime

    make_project(tmp_path)
    task_id = _schedule(tmp_path, "every", """\
        type: repeat
        interval: 1s
        action:
          - t.log: {label: tick}
    """)
    server = servers.start(tmp_path)
    wait_until("three ticks", lambda: count(tmp_path, "tick") >= 3, within=30, server=server)
    cancelled = run(tmp_path, "tasks", "cancel", task_id)
    assert cancelled.returncode == 0, show(cancelled)
    cancelled_at = time.time()
    # a firing claimed before the cancel may still end; none starts for a moment due after it
    wait_until("its firings ended", lambda: all(r["status"] != "running" for r in _task(tmp_path, task_id)["runs"]),
               within=30, server=server)
    _scheduler_went_past_now(tmp_path, server)
    runs_ = _task(tmp_path, task_id)["runs"]
    dues = sorted(datetime.fromisoformat(r["due_at"]) for r in runs_)
    assert len(set(dues)) == len(dues) >= 3, runs_  # one run per due moment
    # the moments of the schedule: whole seconds apart (a moment missed on a busy machine is
    # skipped, misfire `once`, but none is invented between them)
    apart = [(b - a).total_seconds() for a, b in zip(dues, dues[1:])]
    assert all(gap >= 1 and gap == int(gap) for gap in apart), apart
    assert all(d.timestamp() <= cancelled_at for d in dues), (dues, cancelled_at)  # none due after the cancel
    for r in runs_:  # each firing started at or after its moment
        first = records(Path(r["transcript"]))[0]
        assert datetime.fromisoformat(first["ts"].replace("Z", "+00:00")) >= datetime.fromisoformat(r["due_at"]), r
    assert [r["status"] for r in runs_] == ["ok"] * len(runs_) and count(tmp_path, "tick") == len(runs_)
    assert server.stop() == 0 and "Traceback" not in server.stderr


@pytest.mark.slow
def test_a_task_failing_max_failures_times_in_a_row_is_dead_until_retried(tmp_path: Path, servers: Servers) -> None:
    make_project(tmp_path, '[serve]\nmax_failures = 2\n')
    task_id = _schedule(tmp_path, "broken", """\
        type: repeat
        interval: 1s
        action:
          - t.fail: {message: "nope"}
    """)
    server = servers.start(tmp_path)
    wait_until("the task is dead", lambda: _task(tmp_path, task_id)["status"] == "dead", within=30, server=server)
    task = _task(tmp_path, task_id)
    assert task["failures"] == 2 and [r["status"] for r in task["runs"]] == ["failed", "failed"], task
    _scheduler_went_past_now(tmp_path, server)
    assert [x for x in labels(tmp_path) if x == "fail"] == ["fail", "fail"]  # dead: not fired again
    assert metric(server, "chainlang_task_runs_total", status="failed") == 2
    assert metric(server, "chainlang_failures_total", kind="task") == 2
    listed = run(tmp_path, "tasks", "list")
    assert f"{task_id}  repeat dead" in listed.stdout, show(listed)
    retried = run(tmp_path, "tasks", "retry", task_id)
    assert retried.returncode == 0 and retried.stdout.strip() == f"{task_id}: active", show(retried)
    wait_until("it fired again", lambda: labels(tmp_path).count("fail") >= 3, within=30, server=server)


# -- the seed's scenario 6 ------------------------------------------------------------------------------

INBOX = """\
events:
  email.received:
    description: A message arrived.
    payload:
      type: object
      properties: {sender: {type: string}, subject: {type: string}, body: {type: string}}
      required: [sender, subject]
      additionalProperties: false
"""

AUTOMATE = """\
steps:
  - task.register:
      id: sarah-budget
      trigger: post:email.received
      condition: "sender contains 'Sarah' AND (subject contains 'budget' OR body contains 'budget')"
      action:
        - calendar.create: {type: meeting, attendees: [Sarah], duration: 30m, title: Budget Discussion}
        - user.notify: {message: "Scheduled budget meeting with Sarah at {calendar.create.start}"}
"""


@pytest.fixture(scope="module")
def assistant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The example project's stand-in calendar, a chain that registers the hook, and serve."""
    root = tmp_path_factory.mktemp("assistant")
    examples = Path(__file__).resolve().parent.parent / "examples"
    shutil.copyfile(examples / "assistant_tools.py", root / "assistant_tools.py")
    (root / "chainlang.toml").write_text('tools = ["assistant_tools.py"]\n', encoding="utf-8")
    (root / "inbox.hooks.yaml").write_text(INBOX, encoding="utf-8")
    (root / "automate.chain.yaml").write_text(AUTOMATE, encoding="utf-8")
    ran = run(root, "run", "automate.chain.yaml")
    assert ran.returncode == 0, show(ran)
    with Servers() as started:
        yield started.start(root)


def _calendar(project: Path) -> list[dict[str, Any]]:
    path = project / ".chainlang" / "state" / "calendar.json"
    return list(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else []


def test_seed_case_6_under_serve(assistant: Server) -> None:
    assert "1 hook in force" in assistant.stdout, assistant.describe()
    mail = {"sender": "Sarah Lee", "subject": "Q1 budget review"}
    first = assistant.event("email.received", mail, key="msg-42", wait=True)
    assert first.status_code == 200, first.text + assistant.describe()
    assert [(f["hook"], f["status"]) for f in first.json()["fired"]] == [("sarah-budget", "ok")]
    second = assistant.event("email.received", mail, key="msg-42", wait=True)  # the webhook delivers it again
    assert second.json()["status"] == "duplicate", second.text
    other = assistant.event("email.received", {"sender": "Tom", "subject": "budget lunch"}, key="msg-43", wait=True)
    assert other.json()["status"] == "ok" and other.json()["fired"] == [], other.text
    booked = [e for e in _calendar(assistant.project) if e["title"] == "Budget Discussion"]
    assert len(booked) == 1 and booked[0]["attendees"] == ["Sarah"], booked
    assert "Scheduled budget meeting with Sarah at " + booked[0]["start"] in assistant.stderr


def test_a_hook_registered_while_serving_is_in_force(assistant: Server) -> None:
    write(assistant.project, "tom.chain.yaml", """\
        steps:
          - task.register:
              id: tom-sync
              trigger: post:email.received
              condition: "sender contains 'Tom' AND subject contains 'sync'"
              action:
                - calendar.create: {type: meeting, attendees: [Tom], duration: 15m, title: Tom sync}
    """)
    ran = run(assistant.project, "run", "tom.chain.yaml")  # another process, while serve runs
    assert ran.returncode == 0, show(ran)
    reply = assistant.event("email.received", {"sender": "Tom", "subject": "weekly sync"}, wait=True)
    assert reply.status_code == 200, reply.text
    assert [(f["hook"], f["status"]) for f in reply.json()["fired"]] == [("tom-sync", "ok")], reply.text
    assert [e["title"] for e in _calendar(assistant.project)].count("Tom sync") == 1
    # cancelled in another process: no longer in force
    assert run(assistant.project, "tasks", "cancel", "tom-sync").returncode == 0
    reply = assistant.event("email.received", {"sender": "Tom", "subject": "weekly sync"}, wait=True)
    assert reply.json()["fired"] == [], reply.text
    assert [e["title"] for e in _calendar(assistant.project)].count("Tom sync") == 1


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            if int(text[text.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_serve_with_workers(tmp_path: Path, servers: Servers) -> None:
    # two workers take the events on one port and one fires the due tasks, on one store: every
    # event runs once (its key sent twice, to whichever worker), the task fires once, /metrics
    # sums them all, a worker that dies is replaced, and SIGTERM stops them all
    make_project(tmp_path)
    task_id = _schedule(tmp_path, "later", """\
        type: delay
        interval: 1s
        action:
          - t.log: {label: "delayed by the tasks worker"}
    """)
    server = servers.start(tmp_path, "--workers", "2")
    assert "(2 workers and a tasks worker)" in server.stdout, server.describe()
    assert len(_children(server.proc.pid)) == 3, server.describe()
    subjects = [unique("w") for _ in range(12)]

    def send(subject: str) -> int:
        return server.event("email.received", {"sender": "Ann", "subject": subject}, key=subject, wait=True).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(send, subjects + subjects))
    assert codes == [200] * 24
    for subject in subjects:
        assert count(tmp_path, f"mail from Ann: {subject}") == 1
    assert metric(server, "chainlang_events_total", event="email.received", status="ok") == 12
    assert metric(server, "chainlang_events_duplicate_total") == 12
    wait_until("the task fired", lambda: count(tmp_path, "delayed by the tasks worker") == 1, within=6, server=server)
    wait_until("the task completed", lambda: _task(tmp_path, task_id)["status"] == "completed", server=server)

    victim = sorted(_children(server.proc.pid))[0]
    os.kill(victim, signal.SIGKILL)
    wait_until("the worker was replaced", lambda: "starting another" in server.stderr
               and len(_children(server.proc.pid)) == 3, within=15, server=server)
    after = unique("after")
    wait_until("a worker answers", lambda: send(after) == 200, within=15, server=server)
    assert count(tmp_path, f"mail from Ann: {after}") == 1
    assert server.stop() == 0, server.describe()
    assert server.stdout.rstrip().endswith("serve stopped"), server.describe()
    assert _children(server.proc.pid) == []
