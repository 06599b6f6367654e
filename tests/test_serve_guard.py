"""What `chainlang serve` refuses, and how it bounds its connections (LANGUAGE.md §12, "serve is
safe on a laptop"; issue 21), through a real serve on loopback.

- A `Host` that is not serve's (DNS rebinding) gets 421 on every route; a POST from a page of
  another origin 403; a body that is not `application/json` in UTF-8 415 (400 for bytes that
  are not UTF-8), and the hook does not run (the tools of tests/hooks_util.py log what runs).
- Idle, dribbling and oversize-declaring clients are cut at `[serve] header_timeout` and
  `body_timeout`; past `max_connections`, the oldest connections that sent nothing make room;
  under a descriptor limit of 1,024 and 1,100 idle connections, a valid POST still answers
  and serve's stderr stays clean.

Raw sockets are used where httpx would fix the request up (a Host it did not choose, a body
sent a byte at a time); every loop here is bounded in count and in time.
"""

from __future__ import annotations

import codecs
import json
import resource
import socket
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.hooks_util import labels, write, write_tools
from tests.serve_util import Server, Servers, env_with, run, servers, show  # noqa: F401  (servers: a fixture)

HOOKS = """\
events:
  note.sent:
    description: A note arrived.
    payload:
      type: object
      properties: {text: {type: string}}
      required: [text]
hooks:
  - id: log-note
    trigger: post:note.sent
    action:
      - t.log: {label: "note {text}"}
"""


def make_project(root: Path, serve: str = "") -> Path:
    write_tools(root)
    write(root, "chainlang.toml", 'tools = ["hk_tools.py"]\n' + (f"[serve]\n{textwrap.dedent(serve)}" if serve else ""))
    (root / "notes.hooks.yaml").write_text(HOOKS, encoding="utf-8")
    return root


def port_of(server: Server) -> int:
    port = urlsplit(server.url).port
    assert port is not None
    return port


def metric(server: Server, name: str, **labels_: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    reply = server.get("/metrics")
    assert reply.status_code == 200, reply.text
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels_.items()):
                return float(sample.value)
    return 0.0


def error_of(reply: httpx.Response, code: int) -> str:
    assert reply.status_code == code, f"{reply.status_code} {reply.text}"
    assert reply.headers["content-type"].startswith("application/json"), reply.headers
    body = reply.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], body
    return str(body["error"])


def raw(port: int, request: bytes, within: float = 10.0) -> bytes:
    """Send `request` on a new connection and read its answer (whole, by its Content-Length)."""
    with socket.create_connection(("127.0.0.1", port), timeout=within) as sock:
        sock.sendall(request)
        return read_answer(sock, within)


def read_answer(sock: socket.socket, within: float) -> bytes:
    """One answer: its head and as many bytes of body as its Content-Length says; fails when it
    is not whole within `within` s."""
    got = b""
    deadline = time.monotonic() + within
    while True:
        head, blank, body = got.partition(b"\r\n\r\n")
        if blank:
            length = [int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")]
            if length and len(body) >= length[0]:
                return got
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"no whole answer within {within} s: {got!r}")
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            return got
        got += chunk


def read_all(sock: socket.socket, within: float) -> bytes:
    """What the peer sends until it closes the connection; fails when it is still open after `within` s."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + within
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"serve did not close the connection within {within} s; it sent {b''.join(chunks)!r}")
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return b"".join(chunks)
        except socket.timeout:
            continue
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def status_of(answer: bytes) -> int:
    assert answer.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")), answer
    return int(answer.split(b" ", 2)[1])


# -- the refusals: one serve for the module --------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = make_project(tmp_path_factory.mktemp("guarded"))  # no [serve] table: what every laptop has
    with Servers() as started:
        server = started.start(root)
        yield server
        assert server.stop() == 0, server.describe()
        assert "Traceback" not in server.stderr, server.describe()


def note(server: Server, text: str, **headers: str) -> httpx.Response:
    return server.post("/events/note.sent?wait=1", content=json.dumps({"text": text}).encode(),
                       headers={"Content-Type": "application/json", **headers})


FOREIGN_HOSTS = ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example", "localhost.evil.example:{port}",
                 "chains.example.com", "127.0.0.2.nip.io", "[::1", "127.0.0.1:{port}:80", ""]


def test_a_foreign_host_is_refused_on_every_route(guarded: Server) -> None:
    port = port_of(guarded)
    ran = note(guarded, "first")
    assert ran.status_code == 200 and ran.json()["status"] == "ok", ran.text
    run_id = ran.json()["run_id"]
    before = labels(guarded.project)
    routes = [("GET", "/"), ("GET", "/?refresh=0"), ("GET", "/healthz"), ("GET", "/metrics"), ("GET", f"/runs/{run_id}"),
              ("GET", f"/runs/{run_id}/report"), ("GET", "/favicon.ico"), ("GET", "/no/such/page"),
              ("POST", "/events/note.sent?wait=1"), ("POST", "/healthz")]
    for host in FOREIGN_HOSTS:
        for method, path in routes:
            reply = guarded.client.request(  # type: ignore[union-attr]
                method, path, headers={"Host": host.format(port=port), "Content-Type": "application/json"},
                content=json.dumps({"text": "rebound"}).encode() if method == "POST" else None)
            said = error_of(reply, 421)
            assert "[serve] hosts" in said and "127.0.0.1, [::1], localhost" in said, said
            assert run_id not in reply.text and "first" not in reply.text  # nothing of the runs
    assert labels(guarded.project) == before  # no hook ran
    assert metric(guarded, "chainlang_events_rejected_total", reason="wrong_host") == len(FOREIGN_HOSTS) * len(routes)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:{port}", "localhost", "localhost:{port}", "LOCALHOST.",
                                  "[::1]:{port}"])
def test_serve_answers_its_own_names(guarded: Server, host: str) -> None:
    reply = guarded.get("/healthz", headers={"Host": host.format(port=port_of(guarded))})
    assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text
    page = guarded.get("/?refresh=0", headers={"Host": host.format(port=port_of(guarded))})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")


def test_the_names_of_serve_hosts_are_answered_too(tmp_path: Path, servers: Servers) -> None:  # noqa: F811
    make_project(tmp_path, 'hosts = ["chains.example.com", "192.0.2.7", "[2001:DB8::7]"]\n')
    server = servers.start(tmp_path)
    for host in ("chains.example.com", "Chains.Example.Com.:443", "192.0.2.7:8080", "[2001:db8::7]", "localhost"):
        assert server.get("/healthz", headers={"Host": host}).status_code == 200, host
    said = error_of(server.get("/healthz", headers={"Host": "www.chains.example.com"}), 421)
    assert "chains.example.com, 192.0.2.7, [2001:db8::7]" in said, said
    # a page of a listed name (behind a proxy, on the proxy's port) may post
    reply = server.post("/events/note.sent?wait=1", json={"text": "proxied"},
                        headers={"Host": "chains.example.com", "Origin": "https://chains.example.com"})
    assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text


def test_a_request_without_host_is_a_program_and_is_answered(guarded: Server) -> None:
    answer = raw(port_of(guarded), b"GET /healthz HTTP/1.0\r\n\r\n")
    assert status_of(answer) == 200, answer


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"},
    {"Origin": "http://127.0.0.1:1"},  # another program of this machine: another origin
    {"Origin": "http://localhost:{other}"},
    {"Origin": "null"},  # a sandboxed frame, a file:// page
    {"Origin": "not a url"},
    {"Sec-Fetch-Site": "cross-site"},  # a browser that says it, without Origin
    {"Sec-Fetch-Site": "same-site"},
], ids=["site", "port-1", "localhost-other-port", "null", "garbage", "fetch-cross-site", "fetch-same-site"])
def test_a_post_from_a_page_of_another_origin_is_refused(guarded: Server, headers: dict[str, str]) -> None:
    port = port_of(guarded)
    before = labels(guarded.project)
    reply = note(guarded, "from a page", **{k: v.format(port=port, other=port + 1) for k, v in headers.items()})
    said = error_of(reply, 403)
    assert "another site" in said or "origin" in said.lower(), said
    assert "chainlang emit --to" in said, said
    assert labels(guarded.project) == before


@pytest.mark.parametrize("headers", [{}, {"Origin": "http://127.0.0.1:{port}"}, {"Origin": "http://localhost:{port}",
                                                                               "Host": "localhost:{port}"},
                                     {"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}],
                         ids=["no-origin", "own-origin", "own-origin-localhost", "fetch-same-origin", "fetch-none"])
def test_a_post_from_a_program_or_serves_own_origin_is_taken(guarded: Server, headers: dict[str, str]) -> None:
    port = port_of(guarded)
    text = f"taken {len(labels(guarded.project))}"
    reply = note(guarded, text, **{k: v.format(port=port) for k, v in headers.items()})
    assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text
    assert f"note {text}" in labels(guarded.project)


NOT_JSON = [
    ("text/plain", "text/plain", b'{"text": "x"}', 415),
    ("text/plain with charset", "text/plain;charset=UTF-8", b'{"text": "x"}', 415),
    ("a form", "application/x-www-form-urlencoded", b"text=x", 415),
    ("multipart", "multipart/form-data; boundary=b", b'--b\r\n\r\n{"text": "x"}\r\n--b--\r\n', 415),
    ("no content type", None, b'{"text": "x"}', 415),
    ("json in utf-16 said", "application/json; charset=utf-16", '{"text": "x"}'.encode("utf-16"), 415),
    ("json in latin-1 said", "application/json; charset=iso-8859-1", b'{"text": "x"}', 415),
    ("a json-ish type", "application/json-patch+json", b'{"text": "x"}', 415),
    ("utf-16-le with a BOM", "application/json", codecs.BOM_UTF16_LE + '{"text": "x"}'.encode("utf-16-le"), 415),
    ("utf-16-be with a BOM", "application/json", codecs.BOM_UTF16_BE + '{"text": "x"}'.encode("utf-16-be"), 415),
    ("utf-16-le, no BOM", "application/json", '{"text": "x"}'.encode("utf-16-le"), 415),
    ("utf-32 with a BOM", "application/json", '{"text": "x"}'.encode("utf-32"), 415),
    ("utf-32-be, no BOM", "application/json", '{"text": "x"}'.encode("utf-32-be"), 415),
    ("latin-1 bytes", "application/json", '{"text": "café"}'.encode("latin-1"), 400),
]


@pytest.mark.parametrize("what,content_type,body,code", NOT_JSON, ids=[n[0] for n in NOT_JSON])
def test_a_body_that_is_not_json_in_utf8_is_refused(guarded: Server, what: str, content_type: str | None,
                                                    body: bytes, code: int) -> None:
    before = labels(guarded.project)
    headers = {"Content-Type": content_type} if content_type is not None else {}
    request = guarded.client.build_request("POST", "/events/note.sent?wait=1", content=body,  # type: ignore[union-attr]
                                           headers=headers)
    assert content_type is not None or "Content-Type" not in request.headers
    said = error_of(guarded.client.send(request), code)  # type: ignore[union-attr]
    assert "UTF-8" in said and ("application/json" in said or "UTF-16" in said or "not UTF-8" in said), said
    assert labels(guarded.project) == before
    assert guarded.get("/healthz").status_code == 200


@pytest.mark.parametrize("content_type,body", [
    ("application/json", b'{"text": "plain"}'),
    ("application/json; charset=utf-8", b'{"text": "charset"}'),
    ('Application/JSON;charset="UTF-8"', b'{"text": "quoted"}'),
    ("application/json", codecs.BOM_UTF8 + '{"text": "bom é"}'.encode()),
])
def test_json_in_utf8_is_taken(guarded: Server, content_type: str, body: bytes) -> None:
    reply = guarded.post("/events/note.sent?wait=1", content=body, headers={"Content-Type": content_type})
    assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text
    text = json.loads(body.decode("utf-8-sig"))["text"]
    assert f"note {text}" in labels(guarded.project)


def test_emit_to_still_reaches_serve(guarded: Server) -> None:
    sent = run(guarded.project, "emit", "note.sent", "--data", '{"text": "emitted"}', "--to", guarded.url)
    assert sent.returncode == 0 and "1 hook fired" in sent.stdout, show(sent)


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(guarded: Server) -> None:
    before = labels(guarded.project)
    answer = raw(port_of(guarded), b"POST /events/note.sent HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                   b"Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n{\"te")
    assert status_of(answer) == 413 and b"larger than" in answer, answer
    assert labels(guarded.project) == before


# -- the settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("serve,says", [
    ('hosts = ["chains.example.com:443"]', "not a host name"),
    ('hosts = ["https://chains.example.com"]', "not a host name"),
    ('hosts = "chains.example.com"', "hosts"),
    ('header_timeout = "0s"', "from 100ms to 10m"),
    ('body_timeout = "soon"', "not a duration"),
    ("body_timeout = 5", "duration in quotes"),
    ("max_connections = 0", "max_connections"),
    ("max_connections = 999999", "does not fit"),
])
def test_bad_serve_settings_stop_serve_from_starting(tmp_path: Path, serve: str, says: str) -> None:
    make_project(tmp_path, serve + "\n")
    started = run(tmp_path, "serve", "--port", "0", timeout=30)
    assert started.returncode == 2 and says in started.stderr, show(started)
    assert "Traceback" not in started.stderr


def test_a_token_and_any_address_still_check_the_host(tmp_path: Path, servers: Servers) -> None:  # noqa: F811
    make_project(tmp_path, 'token_env = "GUARD_TOKEN"\nhosts = ["chains.example.com"]\n')
    server = servers.start(tmp_path, "--host", "0.0.0.0", env=env_with(GUARD_TOKEN="t0ken"), token="t0ken")
    port = port_of(server)
    for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example"):
        said = error_of(server.get("/healthz", headers={"Host": host}), 421)  # with the token, all the same
        assert "[serve] hosts" in said
    for host in (f"127.0.0.1:{port}", "localhost", "chains.example.com"):
        assert server.get("/healthz", headers={"Host": host}).status_code == 200
    # a POST from another origin, with the token: refused too
    error_of(server.post("/events/note.sent", json={"text": "x"}, headers={"Origin": "http://evil.example"}), 403)
    assert labels(tmp_path) == []


# -- bounded connections -------------------------------------------------------------------------------


def _lowered(limit: int) -> Any:
    def lower() -> None:  # in the child, before serve starts
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard if hard != resource.RLIM_INFINITY else limit))
    return lower


@pytest.mark.slow
def test_idle_dribbling_and_oversize_clients_are_cut(tmp_path: Path, servers: Servers) -> None:  # noqa: F811
    make_project(tmp_path, 'header_timeout = "1s"\nbody_timeout = "1s"\ntoken_env = "GUARD_TOKEN"\n')
    server = servers.start(tmp_path, env=env_with(GUARD_TOKEN="t0ken"), token="t0ken")
    port = port_of(server)
    # an idle client: closed once the header deadline has passed, without an answer
    began = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as idle:
        assert read_all(idle, 10) == b""
    assert time.monotonic() - began >= 0.9  # not before the deadline (it starts once serve accepted)

    # headers sent a byte every 0.3 s: cut at the header deadline, before they are complete
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t0ken\r\nX-Slow: " + b"a" * 40 + b"\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
        sent, cut = 0, False
        deadline = time.monotonic() + 10
        while sent < len(head) and time.monotonic() < deadline:
            try:
                slow.sendall(head[sent:sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            sent += 1
            time.sleep(0.3)
        answer = b"" if cut else read_all(slow, 10)
    assert sent < len(head) and answer == b"", (sent, answer)

    # a body sent a byte every 0.3 s: 408 at the body deadline, and the connection ends
    with socket.create_connection(("127.0.0.1", port), timeout=10) as dribble:
        dribble.sendall(b"POST /events/note.sent HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t0ken\r\n"
                        b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n")
        got = b""
        for _ in range(30):  # at most 9 s
            try:
                dribble.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                break
            dribble.settimeout(0.3)
            try:
                got += dribble.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                break
            if b"\r\n\r\n" in got:
                break
        got += read_all(dribble, 10) if b"body_timeout" not in got else b""
    assert status_of(got) == 408 and b"body_timeout" in got, got

    # a huge Content-Length, without the token: 401 at once, not a byte of the body waited for
    answer = raw(port, b"POST /events/note.sent HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       b"Content-Length: 1000000000000\r\n\r\n", within=10)
    assert status_of(answer) == 401, answer
    # and with it: 413 at once
    answer = raw(port, b"POST /events/note.sent HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t0ken\r\n"
                       b"Content-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n", within=10)
    assert status_of(answer) == 413, answer
    assert labels(tmp_path) == []
    assert metric(server, "chainlang_events_rejected_total", reason="header_timeout") >= 2
    assert metric(server, "chainlang_events_rejected_total", reason="body_timeout") == 1
    # a kept connection goes on answering (the deadlines are per request, not per connection)
    for _ in range(3):
        assert server.get("/healthz").status_code == 200
    assert server.stop() == 0 and "Traceback" not in server.stderr, server.describe()


IDLE = 1100  # idle connections, over a descriptor limit of 1,024


@pytest.mark.slow
def test_a_flood_of_idle_connections_under_a_low_descriptor_limit(tmp_path: Path, servers: Servers) -> None:  # noqa: F811
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = IDLE + 200  # this test's own sockets
    if soft < room:
        if hard != resource.RLIM_INFINITY and hard < room:
            pytest.skip(f"this test opens {IDLE} connections; the descriptor limit here is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (room, hard))
    make_project(tmp_path)  # the defaults
    server = servers.start(tmp_path, preexec_fn=_lowered(1024))
    port = port_of(server)
    opened: list[socket.socket] = []
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 60
        while len(opened) < IDLE and time.monotonic() < deadline:
            sock = socket.socket()
            sock.settimeout(5)
            try:
                sock.connect(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            opened.append(sock)
        assert len(opened) == IDLE, f"only {len(opened)} connections in 60 s"

        def dribble() -> None:  # headers that never end, a byte every 0.5 s, on fresh connections
            while not stop.is_set():
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                        for byte in b"POST /events/note.sent HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100:
                            if stop.is_set():
                                return
                            sock.sendall(bytes([byte]))
                            stop.wait(0.5)
                except OSError:
                    stop.wait(0.1)

        dribblers = [threading.Thread(target=dribble, daemon=True) for _ in range(10)]
        for thread in dribblers:
            thread.start()
        # a valid POST, from a fresh client, answers within a couple of seconds
        with httpx.Client(base_url=server.url, timeout=httpx.Timeout(3.0)) as client:
            reply = client.post("/events/note.sent?wait=1", json={"text": "through the flood"})
            assert reply.status_code == 200 and reply.json()["status"] == "ok", reply.text
            assert client.get("/healthz").status_code == 200
        assert "note through the flood" in labels(tmp_path)
        # the default limit under 1,024 descriptors is 512: the rest made room, or were cut at the deadline
        over = metric(server, "chainlang_events_rejected_total", reason="too_many_connections")
        late = metric(server, "chainlang_events_rejected_total", reason="header_timeout")
        assert over > 0 and over + late >= IDLE - 512, (over, late)
    finally:
        stop.set()
        for sock in opened:
            sock.close()
    assert server.stop() == 0, server.describe()
    assert "Traceback" not in server.stderr and "Errno 24" not in server.stderr, server.describe()
    said = [line for line in server.stderr.splitlines() if "max_connections" in line]
    assert len(said) <= 1, said  # one line for the whole burst
