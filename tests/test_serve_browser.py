"""A browser is an attacker's relay (issue 21, LANGUAGE.md §12 "serve is safe on a laptop"):
headless Chromium, driven by Playwright as in tests/test_report_browser.py, opens pages that
try to use a tokenless `chainlang serve` on loopback.

- A page of another origin (a small HTTP server on another loopback port) POSTs an event
  with `fetch(..., {mode: "no-cors"})` and `text/plain` JSON, which a browser sends without
  asking: the hook must not run (the project's tools log what runs).
- DNS rebinding: Chromium resolves `rebound.test` to 127.0.0.1 (--host-resolver-rules), as
  the attacker's DNS does once the name is rebound. A page of the origin
  `http://rebound.test:SERVE_PORT` (the attacker's, before the switch) runs its script: it
  reads `/`, a run and its report on its own origin, which now reaches serve. It must get
  none of them. (The document is opened from that origin and the attacker's script run in
  it by Playwright: the origin is what matters, not where the document came from.)
- serve's own pages still load, on `127.0.0.1` and on `localhost`, without a console error.

Skipped, saying why, without Playwright or a Chromium."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest

from tests.hooks_util import labels
from tests.serve_util import Server, Servers, servers  # noqa: F401  (servers: a fixture)
from tests.test_report_browser import chromium
from tests.test_serve_guard import make_project, metric

pytestmark = pytest.mark.slow  # a browser
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install -e '.[test]')")

REBOUND = "rebound.test"  # a name of the attacker's, resolved to 127.0.0.1 in the browser

# what the attacker's page runs: every attempt, and what it could read
ATTACK = """
async (target) => {
  const out = {};
  const body = JSON.stringify({text: "from " + location.host});
  try {  // a "simple" request: no preflight, the answer unreadable, but the request is sent
    await fetch(target.serve + "/events/note.sent?wait=1",
                {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body});
    out.no_cors = "sent";
  } catch (e) { out.no_cors = "failed: " + e; }
  try {  // JSON asks first (a preflight), which serve never grants
    const r = await fetch(target.serve + "/events/note.sent?wait=1",
                          {method: "POST", headers: {"Content-Type": "application/json"}, body});
    out.json = r.status + " " + await r.text();
  } catch (e) { out.json = "failed: " + e; }
  for (const [name, path] of [["home", "/?refresh=0"], ["report", "/runs/" + target.run + "/report"],
                               ["run", "/runs/" + target.run]]) {
    try {
      const r = await fetch(target.serve + path);
      out[name] = r.status + " " + await r.text();
    } catch (e) { out[name] = "failed: " + e; }
  }
  return out;
}
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium()
    if path is None:
        pytest.skip("no Chromium on this machine (Debian: apt-get install chromium; or set CHAINLANG_CHROMIUM)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=path, args=["--no-sandbox", f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1"])
        yield launched
        launched.close()


class _Attacker(BaseHTTPRequestHandler):
    """Another site's server: one page, whatever is asked."""

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        page = b"<!doctype html><title>a page of another site</title><p>nothing to see</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (http.server's name)
        pass


@pytest.fixture
def attacker() -> Iterator[str]:
    """The base URL of a page server on another loopback port (another origin)."""
    site = ThreadingHTTPServer(("127.0.0.1", 0), _Attacker)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}"
    finally:
        site.shutdown()
        site.server_close()
        thread.join(10)


@pytest.fixture
def served(tmp_path: Path, servers: Servers) -> tuple[Server, str]:  # noqa: F811
    """A tokenless serve on loopback, with one run of the hook (its id)."""
    server = servers.start(make_project(tmp_path / "notes"))
    ran = server.event("note.sent", {"text": "private"}, wait=True)
    assert ran.status_code == 200 and ran.json()["status"] == "ok", ran.text
    return server, str(ran.json()["run_id"])


def attempt(browser: Any, page_url: str, target: dict[str, str]) -> tuple[dict[str, str], str]:
    """Open `page_url` in a fresh context and run ATTACK in it: what it got, and the text of
    the document opened."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(page_url)
        return dict(page.evaluate(ATTACK, target)), str(page.evaluate("document.documentElement.outerHTML"))
    finally:
        context.close()


def test_a_page_of_another_origin_cannot_run_a_hook_nor_read_the_runs(browser: Any, served: tuple[Server, str],
                                                                       attacker: str) -> None:
    server, run_id = served
    before = labels(server.project)
    got, _ = attempt(browser, attacker + "/", {"serve": server.url, "run": run_id})
    assert got["no_cors"] == "sent", got  # the browser did send it
    assert got["json"].startswith("failed"), got  # the preflight was not granted: not even sent
    for name in ("home", "report", "run"):
        assert got[name].startswith("failed"), got  # no CORS: the page reads nothing
    assert labels(server.project) == before, labels(server.project)  # the hook did not run
    assert metric(server, "chainlang_events_rejected_total", reason="cross_origin") >= 1


def test_a_rebound_name_reads_nothing_and_runs_nothing(browser: Any, served: tuple[Server, str]) -> None:
    server, run_id = served
    port = urlsplit(server.url).port
    before = labels(server.project)
    origin = f"http://{REBOUND}:{port}"  # the attacker's origin, now reaching serve
    got, opened = attempt(browser, origin + "/?refresh=0", {"serve": origin, "run": run_id})
    assert run_id not in opened and "private" not in opened, opened[:2000]  # the page itself: refused too
    for name in ("home", "report", "run", "json"):
        assert got[name].startswith("421 "), got  # read on its own origin: serve refuses the name
        said = json.loads(got[name][4:])["error"]
        assert "[serve] hosts" in said
        assert run_id not in got[name] and "private" not in got[name]
    assert labels(server.project) == before, labels(server.project)
    assert metric(server, "chainlang_events_rejected_total", reason="wrong_host") >= 5


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_serves_own_pages_load_on_its_origin(browser: Any, served: tuple[Server, str], host: str) -> None:
    server, run_id = served
    base = server.url.replace("127.0.0.1", host)
    context = browser.new_context()
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base + "/?refresh=0")
        assert page.locator(f'tr[data-run="{run_id}"]').count() == 1, page.content()[:2000]
        page.goto(f"{base}/runs/{run_id}/report")
        assert page.text_content("#run-status") == "ok"
        opened = page.goto(f"{base}/runs/{run_id}")  # the run's JSON, opened in the browser
        assert opened is not None and opened.status == 200 and json.loads(opened.text())["status"] == "ok"
    finally:
        context.close()
    assert errors == [], errors
