"""The HTTP side of `chainlang serve` (aiohttp): routes, the bearer token, request limits.

aiohttp was chosen over Starlette + uvicorn because serve must own its event loop and its
signals: its `AppRunner` serves inside our loop, so SIGTERM stops intake, drains the
running actions and records the rest in the order §12 asks, with no server of its own
racing us for the signal. It is one well-kept package (server and client, C-accelerated
HTTP parser), in the `serve` extra, imported only by `chainlang serve`.

Routes:
- `POST /events/{name}`: a JSON object, the event's payload; optional `Idempotency-Key`
  header. 202 once the event is recorded (its transcript has begun), or 200 with how its
  hooks ended with `?wait=1`; 200 `duplicate` for a key seen before; 400 a malformed body,
  404 an unknown event, 413 too large, 422 a payload that does not match, 503 while
  stopping (or when the project's hooks have errors; or, with `?wait=1`, status
  `interrupted` when serve stopped past its grace period before the actions ended).
- `GET /runs/{id}`: a run's state (from its transcript); `GET /healthz`; `GET /metrics`;
  `GET /waits` the runs waiting inside (§15; `?status=`, `?limit=`).
- Pages (chainlang.serve.pages): `GET /` the recent runs and the tasks, `GET /runs/{id}/report`
  a run's report, `GET /waiting` the waiting runs with a form answering each question of
  `user.ask` (`POST /waiting/answer`, chainlang.serve.wait_pages). With a token, a browser
  signs in once with `?token=TOKEN` (kept in an HttpOnly, SameSite=Strict cookie, and taken
  out of the address); the cookie is taken for GET requests, and for the answer form's POST
  when it comes from serve's own page (its Origin, checked by the guard).

Before any route (chainlang.serve.guard): a `Host` that is not serve's (421), a POST from a
page of another origin (403), the token (401; an event with a key of its own, `[serve.events.NAME]`,
takes that key only: 401 without one, 403 with another, chainlang.serve.event_keys); then, before the body is read, a body that is
not `application/json` in UTF-8 (415) or declares more than MAX_BODY bytes (413). The body
must arrive within `[serve] body_timeout` (408, and the connection closes).

Every error is a JSON object `{"error": ...}`; no request can make it print a traceback.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from urllib.parse import quote
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from chainlang.serve.guard import Hosts, Refusal, body_text, content_type_refusal, origin_refusal
from chainlang.serve.wait_pages import ANSWER_PATH

if TYPE_CHECKING:
    from aiohttp import web

    from chainlang.serve.connections import ConnectionLimit
    from chainlang.serve.engine import Engine
    from chainlang.serve.scheduler import Scheduler

__all__ = ["MAX_BODY", "make_app"]

log = logging.getLogger("chainlang.serve")

MAX_BODY = 1024 * 1024  # bytes of an event's payload
COOKIE = "chainlang_token"  # a browser's token, once it signed in with ?token=
REFRESH = 5  # seconds between two loads of the page of runs
_MAX_DEPTH = 64


def make_app(engine: "Engine", scheduler: "Scheduler", token: str | None, *, hosts: Hosts | None = None,
             body_timeout: float = 10.0, connections: "ConnectionLimit | None" = None,
             event_tokens: dict[str, str] | None = None) -> "web.Application":
    """serve's routes; `hosts`: the names a Host may give (default: a loopback serve's);
    `connections`: the limit serve listens with (told when a request's headers are in)."""
    from aiohttp import web

    expected = f"Bearer {token}".encode("utf-8") if token else None
    hosts = hosts or Hosts("127.0.0.1")

    def refuse(refusal: Refusal, close: bool = True) -> web.Response:
        engine.metrics.rejected.labels(reason=refusal.reason).inc()
        answer = _json(refusal.status, {"error": refusal.error})
        if close:
            answer.force_close()  # Connection: close; what the client still sends is discarded, not read
        return answer

    def given(value: str) -> bool:
        return expected is not None and hmac.compare_digest(value.encode("utf-8", "surrogateescape"), expected)

    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        if connections is not None:
            connections.began(request.protocol)  # its headers are in: the header deadline is met
        refusal = hosts.refusal(request.headers.get("Host"), request.transport)
        if refusal is None:
            refusal = origin_refusal(request.method, request.headers, hosts)
        if refusal is not None:
            return refuse(refusal)
        if request.path == "/favicon.ico":  # what a browser asks for on its own, token or not: nothing
            return web.Response(status=204)
        keyed = event_tokens and request.match_info.get("name") in event_tokens and request.path.startswith("/events/")
        if keyed:  # an endpoint with a key of its own: that key only (chainlang.serve.event_keys)
            from chainlang.serve.event_keys import key_refusal

            refused = key_refusal(request.match_info["name"], event_tokens or {},
                                  request.headers.get("Authorization", ""))
            if refused is not None:
                engine.metrics.rejected.labels(reason="unauthorized").inc()
                return _json(refused[0], {"error": refused[1]}, headers={"WWW-Authenticate": "Bearer"})
        elif expected is not None and not given(request.headers.get("Authorization", "")):
            # a page, or the answer form of the page of waiting runs: its POST carries an Origin,
            # checked above to be serve's own (a page of another site cannot send it, nor the cookie)
            page = request.method == "GET" or (request.method == "POST" and request.path == ANSWER_PATH
                                               and request.headers.get("Origin") is not None)
            if page and given(f"Bearer {request.cookies.get(COOKIE, '')}"):
                pass  # a browser that signed in
            elif page and "token" in request.query and given(f"Bearer {request.query['token']}"):
                # a link with the token: keep it in a cookie, and take it out of the address
                rest = request.rel_url.with_query([(k, v) for k, v in request.query.items() if k != "token"])
                moved = web.HTTPSeeOther(str(rest))
                moved.set_cookie(COOKIE, request.query["token"], httponly=True, samesite="Strict", path="/")
                return moved
            else:
                engine.metrics.rejected.labels(reason="unauthorized").inc()
                return _json(401, {"error": "this serve needs a bearer token: send Authorization: Bearer TOKEN "
                                            "(the value of the variable [serve] token_env names); in a browser, "
                                            "open the page once with ?token=TOKEN"},
                             headers={"WWW-Authenticate": "Bearer"})
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status == 413:
                engine.metrics.rejected.labels(reason="too_large").inc()
                return _json(413, {"error": f"the body is larger than {MAX_BODY} bytes"})
            return _json(exc.status, {"error": exc.reason})
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not end serve, nor show a traceback to the sender
            log.exception("internal error on %s %s", request.method, request.path)
            return _json(500, {"error": f"internal error: {type(exc).__name__}: {exc}; see serve's log"})

    async def post_event(request: web.Request) -> web.StreamResponse:
        from aiohttp.web_protocol import RequestPayloadError

        name = request.match_info["name"]
        refusal = content_type_refusal(request.headers.get("Content-Type"))
        if refusal is not None:
            return refuse(refusal)
        if (request.content_length or 0) > MAX_BODY:  # refused before a byte of it is read
            return refuse(Refusal(413, "too_large", f"the body is larger than {MAX_BODY} bytes"))
        try:
            async with asyncio.timeout(body_timeout):
                raw = await request.read()
        except TimeoutError:
            # a client sending its body too slowly: answer, and end the connection now (the
            # rest of the body would take as long to discard)
            late = refuse(Refusal(408, "body_timeout", f"the body did not arrive within {body_timeout:g} s "
                                                       "([serve] body_timeout)"))
            await late.prepare(request)
            await late.write_eof()
            request.protocol.force_close()
            return late
        except RequestPayloadError as exc:  # e.g. a Content-Encoding the body does not have
            engine.metrics.rejected.labels(reason="malformed").inc()
            refused = _json(400, {"error": "the body could not be read: "
                                           + " ".join(_short(exc.__cause__ or exc).split())})
            refused.force_close()  # the rest of the body cannot be read: the connection ends with the answer
            request.content.feed_eof()  # and aiohttp is not to read it again (an error, and a reset, after the answer)
            return refused
        text = body_text(raw)
        if isinstance(text, Refusal):
            return refuse(text, close=False)  # the whole body was read: the connection may go on
        try:
            data = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
        except (ValueError, RecursionError) as exc:
            engine.metrics.rejected.labels(reason="malformed").inc()
            return _json(400, {"error": f"the body is not JSON: {_short(exc)}; send the event's payload as a "
                                        "JSON object (Content-Type: application/json)"})
        if _depth(data) > _MAX_DEPTH:
            engine.metrics.rejected.labels(reason="malformed").inc()
            return _json(400, {"error": f"the body nests deeper than {_MAX_DEPTH} levels"})
        key = request.headers.get("Idempotency-Key")
        wait = request.query.get("wait", "") in ("1", "true", "yes")
        try:
            reply = await engine.accept(name, data, key, wait)
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if me is None or me.cancelling():
                raise  # this request itself is cancelled
            # the event's actions were cut (serve stopped past its grace period) while the sender
            # waited for them: say so, rather than closing the connection without an answer
            again = ("send it again with the same Idempotency-Key to learn how it ended" if key is not None else
                     "GET /runs/ID of its run on the next serve says how it ended")
            return _json(503, {"status": "interrupted", "event": name,
                               "error": "serve stopped before the event's actions ended: they are recorded "
                                        f"interrupted, and the next serve resumes them; {again}"})
        return _json(reply.code, reply.body)  # a task its actions schedule wakes the scheduler (store.tasks)

    async def get_run(request: web.Request) -> web.StreamResponse:
        info = await asyncio.to_thread(engine.run_info, request.match_info["run_id"])
        if info is None:
            return _json(404, {"error": f"no run {request.match_info['run_id']!r} in this project"})
        # a transcript the reader refuses (crafted, or damaged): what is wrong, with its line
        return _json(422 if info.get("status") == "unreadable" else 200, info)

    async def healthz(request: web.Request) -> web.StreamResponse:
        counts = {"running": len(engine.jobs), "firing": len(scheduler.running)}
        if not engine.accepting:
            return _json(503, {"status": "stopping", **counts})
        # degraded is still 200: serve answers and fires the other tasks, so a liveness probe must
        # not restart it (that would fix nothing); a readiness check or an alert reads `problems`
        problems = await scheduler.health()
        if problems:
            return _json(200, {"status": "degraded", "problems": problems[:50], **counts})
        return _json(200, {"status": "ok", **counts})

    async def metrics(request: web.Request) -> web.StreamResponse:
        from chainlang.serve.metrics import CONTENT_TYPE

        try:
            due = await asyncio.to_thread(engine.store.due_tasks, scheduler.clock.now(), 1000)
            engine.metrics.queue.set(len([t for t in due if t.id not in scheduler.running]))
        except Exception as exc:  # the store may be busy: the other metrics still answer
            log.warning("metrics: the queue depth could not be read: %s", exc)
        return web.Response(body=engine.metrics.text(), headers={"Content-Type": CONTENT_TYPE})

    async def home(request: web.Request) -> web.StreamResponse:
        from chainlang.serve.pages import list_runs, list_tasks, runs_page

        try:
            limit = int(request.query.get("limit", "100"))
        except ValueError:
            limit = 100

        def page() -> str:
            try:
                tasks, trouble = list_tasks(engine.store), None
            except Exception as exc:  # a StoreError: the runs are still worth showing
                tasks, trouble = None, _short(exc)
            return runs_page(engine.root, list_runs(engine.runs_dir, limit), tasks, trouble,
                             refresh=None if request.query.get("refresh") == "0" else REFRESH)

        return _html(200, await asyncio.to_thread(page))

    async def run_report(request: web.Request) -> web.StreamResponse:
        import secrets

        from chainlang.errors import UsageError
        from chainlang.report import report_html, report_of
        from chainlang.serve.pages import RUN_ID

        run_id = request.match_info["run_id"]
        where = engine.runs_dir / f"{run_id}.jsonl"
        if not RUN_ID.fullmatch(run_id) or not where.is_file():
            return _json(404, {"error": f"no run {run_id!r} in this project"})
        nonce = secrets.token_urlsafe(16)

        def page() -> str:
            return report_html(report_of(where, trusted=engine.root), live=True, home="../../", nonce=nonce)

        try:
            return _html(200, await asyncio.to_thread(page), nonce)
        except UsageError as exc:
            return _json(422, {"error": str(exc)})

    async def waits(request: web.Request) -> web.StreamResponse:
        from chainlang.serve.wait_pages import waits_json
        from chainlang.store.waits import WAIT_STATUSES

        status = request.query.get("status", "waiting")
        if status not in (*WAIT_STATUSES, "all"):
            return _json(400, {"error": f"status={status}: give one of {', '.join(WAIT_STATUSES)} or all"})
        try:
            limit = int(request.query.get("limit", "1000"))
        except ValueError:
            return _json(400, {"error": "limit: give a number of waits, e.g. 100"})
        body = await asyncio.to_thread(waits_json, engine.store, None if status == "all" else status, limit)
        return _json(200, body)

    async def waiting(request: web.Request) -> web.StreamResponse:
        from chainlang.serve.wait_pages import waiting_page

        answered = request.query.get("answered") or None
        page = await asyncio.to_thread(waiting_page, engine.root, engine.store, answered=answered)
        return _html(200, page, forms=True)

    async def answer(request: web.Request) -> web.StreamResponse:
        from chainlang.compile.wait_graph import ANSWER_EVENT
        from chainlang.serve.wait_pages import Refused, answer_of, waiting_page

        kind = (request.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            return refuse(Refusal(415, "unsupported_media_type", "the answer form is sent as "
                                  "application/x-www-form-urlencoded; a program answers with POST "
                                  "/events/user.answered (JSON)"))
        try:
            async with asyncio.timeout(body_timeout):
                form = await request.post()
        except TimeoutError:
            return refuse(Refusal(408, "body_timeout", f"the form did not arrive within {body_timeout:g} s"))
        made = answer_of({k: v for k, v in form.items() if isinstance(v, str)})
        refused = made.refused
        code = 422
        if refused is None:
            reply = await engine.accept(ANSWER_EVENT, made.payload, None, False)
            if reply.code in (200, 202):
                moved = web.HTTPSeeOther(f"../waiting?answered={quote(made.payload['question_id'], safe='')}")
                return moved
            code = reply.code
            problems = [str(p) for p in reply.body.get("errors") or []] or [str(reply.body.get("error"))]
            typed = form.get("answer")
            refused = Refused(made.payload["question_id"], problems, typed if isinstance(typed, str) else "")
        page = await asyncio.to_thread(waiting_page, engine.root, engine.store, refused=refused, root="../")
        return _html(code, page, forms=True)

    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY)
    app.router.add_get("/waits", waits)
    app.router.add_get("/waiting", waiting)
    app.router.add_post(ANSWER_PATH, answer)
    app.router.add_get("/", home)
    app.router.add_get("/runs/{run_id}/report", run_report)
    app.router.add_post("/events/{name}", post_event)
    app.router.add_get("/runs/{run_id}", get_run)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    return app


def _html(code: int, text: str, nonce: str | None = None, forms: bool = False) -> "web.Response":
    """A page: no script but the one its nonce names, no network, not framed, not cached;
    `forms`: its forms may post to serve itself (the answers of the page of waiting runs)."""
    from aiohttp import web

    script = f"'nonce-{nonce}'" if nonce else "'none'"
    action = "'self'" if forms else "'none'"
    return web.Response(status=code, text=text, content_type="text/html", charset="utf-8", headers={
        "Content-Security-Policy": f"default-src 'none'; style-src 'unsafe-inline'; script-src {script}; "
                                   f"img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action {action}",
        "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"})


def _json(code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> "web.Response":
    from aiohttp import web

    text = json.dumps(body, ensure_ascii=False, default=str)
    return web.Response(status=code, text=text, content_type="application/json", headers=headers)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    from chainlang.runtime.emit import finite_float

    return finite_float(text)


def _short(exc: BaseException) -> str:
    return str(exc)[:200] if not isinstance(exc, RecursionError) else "it nests too deeply"


def _depth(value: Any, level: int = 0) -> int:
    if level > _MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level
