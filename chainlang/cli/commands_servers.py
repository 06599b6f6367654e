"""The long-running commands: serve (the project's scheduled tasks and HTTP events), worker
(Temporal) and lsp (the language server, for editors). Each needs an extra; its absence is a
usage error that names it.

Imported at start (click needs the commands for `--help`): imports stay inside the commands.
"""

from __future__ import annotations

import click

from chainlang.cli.guard import guarded, usage_error
from chainlang.cli.options import tools_option


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; other than loopback only with [serve] token_env set.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port (0: any free one, printed when listening).")
@click.option("--grace", default=None, metavar="DURATION",
              help="On SIGTERM, how long running actions may take to finish (default: [serve] grace, 30s).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Serve processes sharing the port and the store (one uses one core).")
@click.option("--worker", "role", type=click.Choice(("http", "tasks")), default=None, hidden=True)  # of --workers
@tools_option
def serve(host: str, port: int, grace: str | None, workers: int, role: str | None, tools: tuple[str, ...]) -> None:
    """Run the project: fire its scheduled tasks when due, take external events over HTTP.

    Run it in the project's directory. POST /events/NAME (a JSON payload, optional
    Idempotency-Key header) fires the hooks on post:NAME; GET /runs/ID, /healthz and
    /metrics (Prometheus) answer too. SIGTERM or Ctrl-C stops it: running actions get the
    grace period, the rest are recorded interrupted and resumed by the next serve.
    """

    def body() -> int:
        from pathlib import Path

        from chainlang.durations import parse_duration
        from chainlang.serve.process import ServeOptions, serve_async
        from chainlang.runtime.calls import run_loop

        seconds = None
        if grace is not None:
            seconds = parse_duration(grace)
            if seconds is None or not 0 <= seconds <= 3600:
                raise usage_error(f"--grace {grace}: give a duration from 0s to 1h, e.g. 30s")
        try:
            import aiohttp  # noqa: F401
            import prometheus_client  # noqa: F401
        except ImportError:
            raise usage_error("chainlang serve needs the serve extra: pip install 'chainlang[serve]'") from None
        if workers > 1 and role is None:
            from chainlang.serve.workers import supervise

            return supervise(Path.cwd(), host, port, workers, grace, tools)
        options = ServeOptions(host=host, port=port, tools=tools, grace=seconds, reuse_port=role is not None,
                               role=role or "both", freeze_heap=True)
        return int(run_loop(serve_async(Path.cwd(), options)))

    guarded(body)


@click.command()
@click.option("--concurrency", type=click.IntRange(1, 1000), default=8, show_default=True,
              help="Tool attempts this worker runs at once.")
@tools_option
def worker(concurrency: int, tools: tuple[str, ...]) -> None:
    """Run the project's chains for Temporal ([engine] kind = "temporal").

    Run it in the project's directory, on as many hosts as you like (each with the same copy
    of the project): it polls the task queue of [engine] and runs the chains' workflows and
    their tools. SIGTERM or Ctrl-C stops it after the attempts under way (10 s at most).
    """

    def body() -> int:
        from pathlib import Path

        from chainlang.runtime.calls import run_loop

        try:
            import temporalio  # noqa: F401
        except ImportError:
            raise usage_error("chainlang worker needs the Temporal SDK: pip install 'chainlang[temporal]'") from None
        from chainlang.engine.temporal.worker import run_worker

        def ready(text: str) -> None:
            click.echo(f"chainlang worker: {text}", err=True)

        run_loop(run_worker(Path.cwd(), concurrency=concurrency, tools=tools, ready=ready))
        return 0

    guarded(body)


@click.command()
def lsp() -> None:
    """Run the language server on stdin/stdout, for editors.

    Diagnostics from the checker as you type, completion of event names, keys and
    params, hover help on events. Started by the editor, not by hand; needs the lsp
    extra (pip install 'chainlang[lsp]').
    """

    def body() -> int:
        try:
            import pygls  # noqa: F401
        except ImportError:
            raise usage_error("chainlang lsp needs the lsp extra: pip install 'chainlang[lsp]'") from None
        from chainlang.lsp import serve_stdio

        serve_stdio()
        return 0

    guarded(body)
