"""`chainlang serve`: the long-running process of a project (LANGUAGE.md §12).

Start: open the store; end the leases of this host's serve processes that are gone;
resume the emits they left; check the hooks in force (errors: it does not start); listen;
fire due tasks. Stop (SIGTERM or SIGINT): take no more events (503), let the running
actions and firings end within the grace period, cancel the rest (each records
`interrupted` and stays open in the store, to be resumed by the next serve), close.

It binds to loopback unless a bearer token is configured (`[serve] token_env`); with a
token, every request must carry it. Whatever it binds, it answers only the names of
`Hosts` (chainlang.serve.guard) and bounds its connections (chainlang.serve.connections):
`[serve] hosts`, `header_timeout`, `body_timeout`, `max_connections`.
"""

from __future__ import annotations

import asyncio
import ipaddress
from datetime import timedelta
import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from chainlang.errors import UsageError

if TYPE_CHECKING:
    from chainlang.registry.registry import Registry
    from chainlang.serve.scheduler import Clock

__all__ = ["ServeOptions", "serve_async"]

log = logging.getLogger("chainlang.serve")


@dataclass
class ServeOptions:
    """How `chainlang serve` runs: its address, tools, grace, lease, and its role among workers."""
    host: str = "127.0.0.1"
    port: int = 8765
    tools: Sequence[str] = ()
    grace: float | None = None  # seconds; None: [serve] grace (default 30 s)
    lease_seconds: float | None = None  # None: [serve] lease (default 30 s)
    poll_seconds: float = 0.5
    registry: "Registry | None" = None
    clock: "Clock | None" = None
    ready: Callable[[str], None] | None = None  # told the base URL once listening
    recover: bool = True  # take up what a stopped serve left (only the first of several workers does)
    reuse_port: bool = False  # several workers listen on one port (serve --workers)
    role: str = "both"  # serve --workers: "http" workers take events, one "tasks" worker fires due tasks
    stop: asyncio.Event | None = None  # set it to stop (tests); signals also stop
    # the process is serve's alone (the CLI): what it holds once listening (modules, the project)
    # is left out of the garbage collector's full passes, which would otherwise walk it again and again
    freeze_heap: bool = False


@dataclass(frozen=True)
class _Bounds:
    """What `[serve]` says of the requests serve answers and of its connections."""

    hosts: tuple[str, ...] = ()
    header_timeout: float = 5.0
    body_timeout: float = 10.0
    max_connections: int = 512


def _bounds(config: Any) -> _Bounds:
    from chainlang.durations import parse_duration
    from chainlang.serve.connections import default_max_connections, descriptor_limit

    serve = config.serve if config is not None else None
    if serve is None:
        return _Bounds(max_connections=default_max_connections())
    most = serve.max_connections or default_max_connections()
    limit = descriptor_limit()
    if serve.max_connections is not None and limit is not None and most > limit - 64:
        raise UsageError(f"[serve] max_connections = {most} does not fit in this process's limit of {limit} open "
                         "files (each connection is one, and serve needs some of its own): lower max_connections, "
                         "or raise the limit (ulimit -n; LimitNOFILE= in a systemd unit)")
    return _Bounds(tuple(serve.hosts), float(parse_duration(serve.header_timeout) or 5.0),
                   float(parse_duration(serve.body_timeout) or 10.0), most)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _event_tokens(config: Any, token: str | None) -> dict[str, str]:
    """`[serve.events.NAME] token_env`: the endpoints with a key of their own (event -> token)."""
    from chainlang.serve.event_keys import event_tokens

    return event_tokens(config.serve if config is not None else None, token)


def _token(config: Any, host: str) -> str | None:
    name = config.serve.token_env if config is not None and config.serve is not None else None
    # surrounding blanks are not part of it (an HTTP header value loses them on the way)
    token = (os.environ.get(name) or "").strip() if name else None
    if name and not token:
        raise UsageError(f"[serve] token_env names {name}, but that variable is not set (or empty); set it to the "
                         "bearer token clients must send")
    if token and any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in token):
        raise UsageError(f"[serve] token_env: the token in {name} has a control character; clients send it in an "
                         "HTTP header, so it must be printable")
    if token is None and not _loopback(host):
        raise UsageError(f"--host {host}: serve listens beyond this machine only with a bearer token; set "
                         "[serve] token_env in chainlang.toml to the name of a variable holding one")
    return token


class _OneLine(logging.Formatter):
    """A log record on one line: an exception is named with its message, its traceback shown
    only with CHAINLANG_DEBUG=1 (a request, however bad, must not print a traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and record.exc_info[1] is not None and not os.environ.get("CHAINLANG_DEBUG"):
            exc = record.exc_info[1]
            cause = exc.__cause__ or exc.__context__
            said = f"{type(exc).__name__}: {exc}" + (f" ({type(cause).__name__}: {cause})" if cause else "")
            record = logging.makeLogRecord({**record.__dict__, "msg": f"{record.getMessage()}: {' '.join(said.split())}",
                                            "args": None, "exc_info": None, "exc_text": None})
        return super().format(record)


def _start_logging() -> None:
    worker = os.environ.get("CHAINLANG_SERVE_WORKER")  # serve --workers: which one speaks
    prefix = f"serve[{worker}]: " if worker else "serve: "
    # serve's own log, and aiohttp's (a request it could not parse), on stderr
    for name, level, what in (("chainlang.serve", logging.INFO, ""), ("aiohttp", logging.WARNING, "http: ")):
        logger = logging.getLogger(name)
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(_OneLine(prefix + what + "%(message)s"))
            logger.addHandler(handler)
            logger.setLevel(level)
            logger.propagate = False


def _import_firing_path() -> None:
    """Import, before serve takes anything, the modules an event's or a task's first firing
    would import on its way (0.1-0.3 s on a busy machine, paid by the first due task: it began
    that late). Imports only: one left out here is imported when first used, as before."""
    import chainlang.journal.jsonl  # noqa: F401
    import chainlang.journal.lock  # noqa: F401
    import chainlang.runtime.emit  # noqa: F401
    import chainlang.runtime.engine  # noqa: F401
    import chainlang.runtime.hooks  # noqa: F401
    import chainlang.runtime.models  # noqa: F401
    import chainlang.runtime.runner  # noqa: F401
    import chainlang.runtime.secret_refs  # noqa: F401
    import chainlang.runtime.walk  # noqa: F401
    import chainlang.tasks.firing  # noqa: F401


async def serve_async(start: Path, options: ServeOptions) -> int:
    from aiohttp import web

    from chainlang.config.project import find_project_config
    from chainlang.errors import ConfigError, RegistryError
    from chainlang.runtime.context import SystemClock
    from chainlang.runtime.decide import close_decider, decider_from_config
    from chainlang.serve.engine import Engine
    from chainlang.serve.projects import Projects
    from chainlang.serve.metrics import Metrics
    from chainlang.serve.scheduler import Scheduler
    from chainlang.store import StoreError
    from chainlang.tasks.stored import project_store

    _start_logging()
    try:
        config = find_project_config(start)
    except RegistryError as exc:
        raise UsageError(str(exc)) from None
    root = Path(config.root) if config is not None else start
    token = _token(config, options.host)
    event_tokens = _event_tokens(config, token)
    bounds = _bounds(config)
    serve_config = config.serve if config is not None else None
    grace = options.grace
    if grace is None:
        from chainlang.durations import parse_duration

        grace = float(parse_duration(serve_config.grace) or 30) if serve_config is not None else 30.0
    try:
        store = project_store(root)
    except StoreError as exc:
        raise UsageError(f"cannot open the project's store: {exc}") from None
    projects = Projects(root, options.tools, options.registry, store)
    try:
        project = projects.current()
        if project.hooks is None:
            errors = [f"{d.file}:{d.line}:{d.column}: {d.message}" for d in project.diagnostics
                      if d.severity == "error"]
            raise UsageError("the project's hooks have errors, so serve does not start:\n  " + "\n  ".join(errors[:20]))
        from chainlang.serve.event_keys import check_keyed_events

        check_keyed_events(project, event_tokens)
        try:
            decider = decider_from_config(project.config)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
        metrics = Metrics()
        _import_firing_path()
        engine = Engine(root, store, projects, metrics, tuple(options.tools), options.registry, decider)
        # the runs waiting inside (§15): resumed when their wait is settled or its deadline passes
        from chainlang.serve.waits import WaitKeeper

        engine.waits = WaitKeeper(root, store, tuple(options.tools), options.registry, decider, projects=projects)
        scheduler = Scheduler(store, options.clock or SystemClock(), engine.fire_task, engine.runs_dir,
                              lease_seconds=options.lease_seconds or _lease(serve_config),
                              on_quarantine=metrics.quarantined.set,
                              max_failures=serve_config.max_failures if serve_config is not None else 3,
                              poll_seconds=options.poll_seconds, lead=timedelta(seconds=0.2),
                              prepare=engine.prepare_task)
        # the chain files' `triggers:`, registered now and whenever a file changes (by the process that fires tasks)
        watching = None
        if options.role != "http":
            from chainlang.serve.trigger_watch import TriggerWatch

            watch = TriggerWatch(projects, store, scheduler.clock, scheduler.wake)
            await watch.sync_safely()
            watching = asyncio.create_task(watch.run(asyncio.Event()))
        try:
            return await _serve(web, engine, scheduler, token, options, grace, project, close_decider, bounds,
                                event_tokens)
        finally:
            if watching is not None:
                watching.cancel()
    finally:
        projects.close()
        store.close()


def _lease(serve_config: Any) -> float:
    from chainlang.durations import parse_duration

    return float(parse_duration(serve_config.lease) or 30) if serve_config is not None else 30.0


async def _serve(web: Any, engine: Any, scheduler: Any, token: str | None, options: ServeOptions, grace: float,
                 project: Any, close_decider: Any, bounds: _Bounds, event_tokens: dict[str, str] | None = None) -> int:
    from chainlang.serve.app import make_app
    from chainlang.serve.connections import ConnectionLimit
    from chainlang.serve.guard import Hosts
    from chainlang.store import StoreError

    try:
        freed = await scheduler.recover() if options.recover else []
    except StoreError as exc:
        raise UsageError(f"cannot take up what the last serve left: {exc}") from None
    if freed:
        log.info("took up what a stopped serve left: %d task lease(s) freed", len(freed))
    runner = None
    listening = None
    url = "no HTTP: it fires the due tasks"
    loop = asyncio.get_running_loop()
    if options.role != "tasks":
        connections = ConnectionLimit(bounds.max_connections, bounds.header_timeout,
                                      lambda reason: engine.metrics.rejected.labels(reason=reason).inc())
        app = make_app(engine, scheduler, token, hosts=Hosts(options.host, bounds.hosts),
                       body_timeout=bounds.body_timeout, connections=connections, event_tokens=event_tokens)
        # aiohttp's keep-alive timeout bounds the wait for a kept connection's next request (its
        # headers); lingering, the time spent discarding the body of a request answered without it
        runner = web.AppRunner(app, handle_signals=False, access_log=None, keepalive_timeout=bounds.header_timeout,
                               lingering_time=bounds.body_timeout)
        await runner.setup()
        connections.factory = runner.server
        try:
            # serve listens with the limit of open connections (aiohttp's TCPSite has none)
            listening = await loop.create_server(connections, options.host, options.port, reuse_address=True,
                                                 reuse_port=options.reuse_port or None)
        except OSError as exc:
            await runner.cleanup()
            raise UsageError(f"cannot listen on {options.host}:{options.port}: {exc.strerror or exc}") from None
        sockets: list[Any] = list(listening.sockets or [])
        port = sockets[0].getsockname()[1] if sockets else options.port
        host = f"[{options.host}]" if ":" in options.host else options.host
        url = f"http://{host}:{port}"
    stopping = options.stop or asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    hooks = len(project.hooks) if project.hooks is not None else 0
    if options.freeze_heap:
        import gc

        gc.collect()  # what startup left in cycles goes first: frozen objects are never collected
        gc.freeze()
    print(f"serving {project.root} on {url} ({hooks} hook{'s' if hooks != 1 else ''} in force"
          f"{', token required' if token else ''}); stop with Ctrl-C or SIGTERM", flush=True)
    if options.ready is not None:
        options.ready(url)
    # the emits a stopped serve left are resumed once serve listens: resuming a long action must
    # not keep serve deaf meanwhile (a health check that fails for as long would restart it, cutting
    # that action again); an event with the key of one of them waits for it, or takes it up itself
    recovering = asyncio.create_task(_recover(engine)) if options.recover and options.role != "tasks" else None
    # the workers that take events leave the due tasks to the tasks worker: a busy loop would make them late
    ticking = asyncio.create_task(scheduler.run(stopping) if options.role != "http" else stopping.wait())
    # the waits' deadlines and the runs settled by other processes: looked at by the process that fires
    # tasks (an HTTP worker resumes the runs it delivered an event to itself)
    keeping = asyncio.create_task(engine.waits.run(stopping)) \
        if options.role != "http" and engine.waits is not None else None
    retaining = _retain(engine, project, options, stopping)
    try:
        await stopping.wait()
    finally:
        # a second signal while draining: stop now, without the rest of the grace period (what
        # was cut is recorded interrupted all the same, and "serve stopped" still said)
        hurry = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, hurry.set)
        try:
            if engine.jobs or scheduler.running:
                log.info("stopping: no new events; waiting up to %gs for %d event(s) and %d task firing(s) "
                         "(signal again to stop now)", grace, len(engine.jobs), len(scheduler.running))
            else:
                log.info("stopping: no new events")
            engine.accepting = False
            stopping.set()
            if retaining is not None:
                retaining.cancel()
            await ticking
            if keeping is not None:
                await keeping
            events, firings = await _drain(engine, scheduler, grace, hurry, recovering)
            if events or firings:
                log.info("interrupted %d event(s) and %d firing(s) %s; the next serve resumes them", events, firings,
                         "on a second signal" if hurry.is_set() else "past the grace period")
            if listening is not None:
                listening.close()  # no new connections; the open ones end with the runner
            if runner is not None:
                await runner.cleanup()
            await close_decider(engine.decider)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
    print("serve stopped", flush=True)
    return 0


def _retain(engine: Any, project: Any, options: ServeOptions, stopping: asyncio.Event) -> "asyncio.Task[None] | None":
    """`[runs] keep`, applied now and every ten minutes by the process that fires tasks (one
    collector however many workers); None when the project sets no retention."""
    from chainlang.journal.retention import parse_keep
    from chainlang.serve.retention import keep_runs

    runs = getattr(project.config, "runs", None)
    keep = parse_keep(runs.keep) if runs is not None else None
    if options.role == "http" or keep is None:
        return None
    return asyncio.create_task(keep_runs(engine.runs_dir, keep, stopping))


async def _recover(engine: Any) -> None:
    """Take up the emits a stopped serve left (in the background: serve listens meanwhile)."""
    from chainlang.store import StoreError

    try:
        taken = await engine.recover()
    except StoreError as exc:
        log.error("could not take up the emits a stopped serve left: %s", exc)
        return
    except Exception:  # a bug: serve goes on, the emits stay claimed for the next serve
        log.exception("could not take up the emits a stopped serve left")
        return
    if any(taken.values()):  # the counts Engine.recover keeps (resumed, busy, failed), whichever it has
        log.info("took up the emits a stopped serve left: %s", ", ".join(f"{n} {what}" for what, n in taken.items() if n))


async def _drain(engine: Any, scheduler: Any, grace: float, hurry: asyncio.Event,
                 recovering: "asyncio.Task[None] | None" = None) -> tuple[int, int]:
    """Let the running events and firings end within `grace` s (or until `hurry` is set);
    cancel the rest. How many events and firings were cut."""
    waits = getattr(engine, "waits", None)
    draining = asyncio.ensure_future(asyncio.gather(engine.drain(grace), scheduler.drain(grace),
                                                    waits.drain(grace) if waits is not None else asyncio.sleep(0)))
    hurried = asyncio.ensure_future(hurry.wait())
    await asyncio.wait({draining, hurried}, return_when=asyncio.FIRST_COMPLETED)
    hurried.cancel()
    forced = [0, 0]
    if not draining.done():
        log.info("signalled again: stopping now")
        for i, jobs in enumerate((list(engine.jobs.values()), list(scheduler.running.values()))):
            for job in jobs:
                if not job.done():
                    job.cancel()
                    forced[i] += 1
        for job in list(waits.resuming.values()) if waits is not None else []:
            job.cancel()  # a resumed run: recorded interrupted (WaitKeeper.drain says how to go on)
    cut_events, cut_firings, _ = await draining
    # what began after the drain looked: an emit the recovery took up next, or one whose request
    # got past the stop just before it (its claim was being written): cut now, resumed next time
    if recovering is not None and not recovering.done():
        recovering.cancel()
    late = [job for job in engine.jobs.values() if not job.done()]
    for job in late:
        job.cancel()
    await asyncio.gather(*late, *([recovering] if recovering is not None else []), return_exceptions=True)
    return cut_events + forced[0] + len(late), len(cut_firings) + forced[1]
