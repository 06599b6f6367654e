"""The `chainlang` command. Imports are lazy: `--help` must stay fast.

Exit codes of `check`: 0 no errors, 1 errors found, 2 usage or internal error.
No input, however malformed, may end in a Python traceback: unexpected
exceptions are reported in one line (exit 2), with the traceback only under
CHAINLANG_DEBUG=1.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, NoReturn, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

FORMATS = ("text", "json", "github", "sarif")


def _tools_option(fn: F) -> F:
    return click.option(
        "--tools",
        "tools",
        multiple=True,
        metavar="MODULE_OR_FILE",
        help="A Python module name or .py file whose @event tools are registered (repeatable).",
    )(fn)


def _usage_exit(message: str) -> NoReturn:
    from chainlang.redaction import escape_surrogates

    click.echo(f"chainlang: error: {escape_surrogates(message)}", err=True)
    sys.exit(2)


def _usage(message: str) -> Exception:
    from chainlang.errors import UsageError

    return UsageError(message)


def _guarded(fn: Callable[[], int]) -> None:
    """Run a command body: usage errors exit 2 with one line; so does anything unexpected."""
    from chainlang.errors import UsageError

    try:
        code = fn()
    except UsageError as exc:
        from chainlang.cli.words import cli_message

        _usage_exit(cli_message(exc))
    except (KeyboardInterrupt, BrokenPipeError):
        sys.exit(130 if sys.exc_info()[0] is KeyboardInterrupt else 0)
    except (SystemExit, click.exceptions.Exit, click.ClickException):
        raise
    except Exception as exc:  # an internal error must still not print a traceback
        if os.environ.get("CHAINLANG_DEBUG"):
            raise
        _usage_exit(f"internal error: {type(exc).__name__}: {exc} (set CHAINLANG_DEBUG=1 for a traceback, and please report it)")
    sys.exit(code)


def _use_color(stream: Any) -> bool:
    from chainlang.output.terminal import use_color

    return use_color(stream)


def _leave_temporal(code: Any) -> None:
    """End the process at once when it talked to Temporal: the SDK's client threads (Rust,
    tokio) may crash the interpreter's finalization (temporalio/sdk-python#300), which
    would turn a finished command's exit status into a signal."""
    from chainlang.engine import remote_engine_used

    if not remote_engine_used():
        return
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else 0)


class _Group(click.Group):
    """Usage errors from click itself get the same one-line form (and exit 2) as ours."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._main(*args, **kwargs)
        except SystemExit as exc:
            _leave_temporal(exc.code)
            raise

    def _main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "chainlang"
            _usage_exit(f"{exc.format_message()} (see '{command} --help')")
        except click.exceptions.Abort:
            sys.exit(130)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from chainlang.version import describe

    click.echo(describe())
    ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and the commit it comes from, and exit.")
def main() -> None:
    """chainlang: check and run declarative YAML event chains."""


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, help="Output format.")
@_tools_option
@click.option("--color/--no-color", default=None, help="Colour the text output (default: when stdout is a terminal and NO_COLOR is unset).")
def check(paths: tuple[str, ...], fmt: str, tools: tuple[str, ...], color: bool | None) -> None:
    """Check chain and hooks files before anything runs.

    PATHS are files or directories; directories are searched for *.chain.yaml,
    *.chain.yml and *.hooks.yaml. Exit code: 0 no errors, 1 errors, 2 usage error.
    """

    def body() -> int:
        from chainlang.version import __version__
        from chainlang.pipeline import check_files
        from chainlang.output import render
        from chainlang.tasks.stored import stored_hook_files

        result = check_files(paths, tools=tools, stored_hooks=stored_hook_files)
        use_color = _use_color(sys.stdout) if color is None else color
        text = render(result.diagnostics, fmt, result.sources, color=use_color and fmt == "text",
                      tool_version=__version__, files_checked=len(result.files))
        if text:
            # click strips ANSI codes when stdout is not a terminal unless told otherwise
            click.echo(text.rstrip("\n"), color=use_color and fmt == "text")
        return 0 if result.ok else 1

    _guarded(body)


@main.command()
@click.argument("file", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(("mermaid", "dot", "json")), default="mermaid", show_default=True,
              help="Output format.")
@_tools_option
def graph(file: str, fmt: str, tools: tuple[str, ...]) -> None:
    """Print the compiled execution graph of a chain.

    The chain is checked first: a chain with errors is not compiled (exit 1).
    """

    def body() -> int:
        from chainlang.pipeline import check_files
        from chainlang.compile import compile_chain
        from chainlang.compile.render import RENDERERS
        from chainlang.output import render
        from chainlang.tasks.stored import stored_hook_files

        result = check_files([file], tools=tools, stored_hooks=stored_hook_files)
        if not result.ok:
            text = render(result.diagnostics, "text", result.sources, color=_use_color(sys.stderr),
                          files_checked=len(result.files))
            click.echo(text.rstrip("\n"), err=True, color=_use_color(sys.stderr))
            return 1
        assert result.chains, "a checked file has a chain"
        click.echo(RENDERERS[fmt](compile_chain(result.chains[0])))
        return 0

    _guarded(body)


_PROGRESS = click.option(
    "--progress", type=click.Choice(("auto", "plain", "rich", "quiet")), default="auto", show_default=True,
    help="Progress on stderr: live (rich) on a terminal, plain lines otherwise.")
_JSON = click.option("--json", "as_json", is_flag=True,
                     help="Print the run's outputs as one JSON object on stdout (progress goes to stderr).")
_COLOR = click.option("--color/--no-color", default=None, help="Colour the progress (default: when stderr is a terminal).")


_DETACH = click.option("--detach", is_flag=True,
                       help="At the first wait, end with exit 4 (status waiting) instead of waiting here: the event "
                            "(through chainlang serve) or the deadline continues the run.")


_ANSWER = click.option("--answer", "answers", multiple=True, metavar="ID=VALUE",
                       help="Answer the user.ask step with this id (or path) when it asks (repeatable); VALUE is "
                            "parsed as JSON when it parses, else taken as text; checked against its choices.")


@main.command()
@click.argument("file", type=click.Path())
@click.option("--input", "inputs", multiple=True, metavar="NAME=VALUE",
              help="A chain input (repeatable); VALUE is parsed as JSON when it parses, else taken as text.")
@_JSON
@click.option("--transcript", type=click.Path(), default=None,
              help="Where to write the JSONL transcript (default: .chainlang/runs/RUN_ID.jsonl in the project).")
@click.option("--now", default=None, metavar="ISO-8601", help="Pin the run's clock, e.g. 2025-01-15T09:30:00+01:00.")
@click.option("--thread", default=None, metavar="ID",
              help="Attach the run to a stored thread: each step's result is added to it (see chainlang threads).")
@_DETACH
@_ANSWER
@_tools_option
@_PROGRESS
@_COLOR
def run(file: str, inputs: tuple[str, ...], as_json: bool, transcript: str | None, now: str | None,
        thread: str | None, detach: bool, answers: tuple[str, ...], tools: tuple[str, ...], progress: str,
        color: bool | None) -> None:
    """Run a chain.

    The chain is checked first; a chain with errors does not start. Exit code: 0 the run
    finished ok (or stopped cleanly at a break), 1 the chain is invalid or a step failed
    the run, 2 usage error, 3 a limit stopped the run, 4 the run waits (--detach).
    """

    def body() -> int:
        from chainlang.cli.run import run_command

        return run_command(file, inputs, as_json, transcript, now, tools, progress, color, thread, detach, answers)

    _guarded(body)


@main.command()
@click.argument("transcript", type=click.Path())
@_JSON
@_tools_option
@click.option("--rerun", multiple=True, metavar="STEP",
              help="Run this unfinished non-idempotent step again (you checked it did not take effect).")
@click.option("--skip", multiple=True, metavar="STEP", help="Go on without this unfinished non-idempotent step.")
@_DETACH
@_ANSWER
@_PROGRESS
@_COLOR
def resume(transcript: str, as_json: bool, tools: tuple[str, ...], rerun: tuple[str, ...], skip: tuple[str, ...],
           detach: bool, answers: tuple[str, ...], progress: str, color: bool | None) -> None:
    """Continue an interrupted run from its transcript.

    Steps that finished are not run again; recorded clock readings and decide answers are
    reused. A step that started but did not finish runs again if its event is idempotent;
    otherwise the run stops and names it (see --rerun and --skip).
    """

    def body() -> int:
        from chainlang.cli.run import resume_command

        return resume_command(transcript, as_json, tools, rerun, skip, progress, color, detach, answers)

    _guarded(body)


@main.command()
@click.argument("name")
@click.option("--data", "data", default="{}", show_default=True, metavar="JSON",
              help="The event's payload, a JSON object; it must match the payload declared for the event.")
@click.option("--id", "key", default=None, metavar="KEY",
              help="An idempotency key: the same KEY emitted again in this project fires nothing.")
@_JSON
@click.option("--transcript", type=click.Path(), default=None,
              help="Where to write the JSONL transcript (default: .chainlang/runs/RUN_ID.jsonl in the project).")
@click.option("--now", default=None, metavar="ISO-8601", help="Pin the clock the hooks' actions read.")
@click.option("--to", "to", default=None, metavar="URL",
              help="Post the event to a running chainlang serve (its base URL, http://HOST:PORT) instead.")
@click.option("--no-wait", is_flag=True, help="With --to: return once serve has recorded the event (202).")
@_tools_option
@_PROGRESS
@_COLOR
def emit(name: str, data: str, key: str | None, as_json: bool, transcript: str | None, now: str | None,
         to: str | None, no_wait: bool, tools: tuple[str, ...], progress: str, color: bool | None) -> None:
    """Fire an external event: the matching post: hooks of the project run.

    Run it in the project's directory. The data is checked against the payload declared for
    NAME (events: in a hooks file); every hook on post:NAME whose condition holds runs its
    action, recorded in one transcript. Exit code: 0 every action ended ok (or none fired,
    or the --id was processed before), 1 invalid data or hooks, or an action failed,
    2 usage error, 3 a limit stopped an action.
    """

    def body() -> int:
        if to is not None:
            from chainlang.cli.post import post_command

            if transcript is not None or now is not None or tools:
                raise _usage("--to posts to a serve: --transcript, --now and --tools are the serve's own")
            return post_command(to, name, data, key, as_json, not no_wait, color)
        from chainlang.cli.run import emit_command

        if no_wait:
            raise _usage("--no-wait goes with --to")
        return emit_command(name, data, key, as_json, transcript, now, tools, progress, color)

    _guarded(body)


@main.command()
@click.argument("transcript", type=click.Path())
@click.option("-o", "--output", metavar="FILE.html", help="Where to write it (default: beside the transcript, "
              "RUN.html; - for stdout).")
def report(transcript: str, output: str | None) -> None:
    """Write an HTML report of a run from its transcript.

    One self-contained file: the run's summary, a timeline of its steps (parallel branches
    in lanes, retries, hook actions), each step's params, result, error and decisions, and
    the chain's graph. Works for a run under way or interrupted.
    """

    def body() -> int:
        from chainlang.cli.report import report_command

        return report_command(transcript, output)

    _guarded(body)


@main.command()
@click.option("--since", default=None, metavar="WHEN",
              help="Only events at or after WHEN: a moment (2026-11-23T10:00:00Z) or a span back from now (2h, 7d).")
@click.option("--kind", "kinds", multiple=True, metavar="KIND",
              help="Only events of this kind (repeatable): task_added, run_finished, lease_taken, wait_delivered...")
@click.option("--task", default=None, metavar="TASK_ID", help="Only the events of this task.")
@click.option("--subject", default=None, metavar="ID", help="Only the events about this id (a thread, a run...).")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(0, 100_000),
              help="The newest events shown at most.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event (seq, at, kind, subject, data).")
def log(since: str | None, kinds: tuple[str, ...], task: str | None, subject: str | None, limit: int,
        as_json: bool) -> None:
    """The project's event log: what happened to its tasks, leases, threads, memory and waits.

    Oldest first, the newest --limit events. Run it in the project's directory.
    """

    def body() -> int:
        from chainlang.cli.log import log_command

        return log_command(since, kinds, task, subject, limit, as_json)

    _guarded(body)


@main.command()
@click.argument("action", type=click.Choice(("list", "show", "cancel", "retry")))
@click.argument("task_id", required=False)
@click.option("--status", type=click.Choice(("pending", "active", "completed", "archived", "dead")), default=None,
              help="With list: only tasks in this state.")
@click.option("--json", "as_json", is_flag=True, help="Print the tasks (or the task) as JSON.")
def tasks(action: str, task_id: str | None, status: str | None, as_json: bool) -> None:
    """The project's stored tasks: hooks stored by task.register, and scheduled tasks.

    list: one line each (--status to filter); show TASK_ID: the task, its definition and
    its runs; cancel TASK_ID: archive it (a hook stops firing); retry TASK_ID: make a dead
    task active again. Run it in the project's directory.
    """

    def body() -> int:
        from chainlang.cli.tasks import tasks_command

        return tasks_command(action, task_id, status, as_json)

    _guarded(body)


@main.command()
@click.argument("action", type=click.Choice(("list", "show", "create", "archive")), required=False, default="list")
@click.argument("thread_id", required=False)
@click.option("--status", type=click.Choice(("active", "archived")), default=None,
              help="With list: only threads in this state.")
@click.option("--summary", default=None, metavar="TEXT", help="With create: the new thread's summary.")
@click.option("--limit", type=click.IntRange(0), default=None, metavar="N",
              help="With show: only the thread's last N events.")
@click.option("--project", default=None, metavar="DIR", type=click.Path(),
              help="The project (default: the one of the working directory: the nearest chainlang.toml).")
@click.option("--now", default=None, metavar="ISO-8601",
              help="With create and archive: the moment to record (default: now); give the runs' --now, so that "
                   "a thread's times come from one clock.")
@click.option("--json", "as_json", is_flag=True, help="Print the threads (or the thread) as JSON.")
def threads(action: str, thread_id: str | None, status: str | None, summary: str | None, limit: int | None,
            project: str | None, now: str | None, as_json: bool) -> None:
    """The project's threads: the conversations runs are attached to (run --thread ID).

    list (the default): one line each, the most recently updated first (--status to filter);
    show THREAD_ID: the thread and its events; create THREAD_ID: a new active thread
    (--summary); archive THREAD_ID: it is no longer matched nor attached to.
    """

    def body() -> int:
        from chainlang.cli.threads import threads_command

        return threads_command(action, thread_id, status, summary, limit, project, as_json, now=now)

    _guarded(body)


@main.command()
@click.argument("action", type=click.Choice(("list", "show", "cancel")), required=False, default="list")
@click.argument("run", required=False)
@click.argument("step", required=False)
@click.option("--status", type=click.Choice(("waiting", "delivered", "timed_out", "cancelled", "all")), default=None,
              help="With list: the waits in this state (default: waiting).")
@click.option("--project", default=None, metavar="DIR", type=click.Path(),
              help="The project (default: the one of the working directory: the nearest chainlang.toml).")
@click.option("--json", "as_json", is_flag=True, help="Print the waits (or the wait) as JSON.")
def waits(action: str, run: str | None, step: str | None, status: str | None, project: str | None,
          as_json: bool) -> None:
    """The runs that wait for an event or an answer (wait:, user.ask).

    list (the default): each waiting run, what it waits for (event, where and the values it
    froze, deadline, question); show RUN [STEP]: one wait, however it ended; cancel RUN
    [STEP]: the step fails with error type cancelled. RUN is a run id or its transcript.
    Exit code: 0, 1 no such wait or it was settled already, 2 usage error.
    """

    def body() -> int:
        from chainlang.cli.waits import waits_command

        return waits_command(action, run, step, status, project, as_json)

    _guarded(body)


@main.command()
@click.argument("path", required=False, type=click.Path())
@click.option("--keep", default=None, metavar="N|AGE",
              help="Keep the newest N ended runs, or those that ended within AGE (e.g. 30d); default: [runs] keep.")
@click.option("--dry-run", is_flag=True, help="Say what would be removed, remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print what was removed and kept as JSON.")
def gc(path: str | None, keep: str | None, dry_run: bool, as_json: bool) -> None:
    """Remove the transcripts of ended runs beyond the retention.

    PATH is the project's directory (default: the working directory). Runs that wait, were
    interrupted or are going are never removed: they can still be resumed.
    """

    def body() -> int:
        from chainlang.cli.gc import gc_command

        return gc_command(path, keep, dry_run, as_json)

    _guarded(body)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; other than loopback only with [serve] token_env set.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port (0: any free one, printed when listening).")
@click.option("--grace", default=None, metavar="DURATION",
              help="On SIGTERM, how long running actions may take to finish (default: [serve] grace, 30s).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Serve processes sharing the port and the store (one uses one core).")
@click.option("--worker", "role", type=click.Choice(("http", "tasks")), default=None, hidden=True)  # of --workers
@_tools_option
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
                raise _usage(f"--grace {grace}: give a duration from 0s to 1h, e.g. 30s")
        try:
            import aiohttp  # noqa: F401
            import prometheus_client  # noqa: F401
        except ImportError:
            raise _usage("chainlang serve needs the serve extra: pip install 'chainlang[serve]'") from None
        if workers > 1 and role is None:
            from chainlang.serve.workers import supervise

            return supervise(Path.cwd(), host, port, workers, grace, tools)
        options = ServeOptions(host=host, port=port, tools=tools, grace=seconds, reuse_port=role is not None,
                               role=role or "both")
        return int(run_loop(serve_async(Path.cwd(), options)))

    _guarded(body)


@main.command()
@click.option("--concurrency", type=click.IntRange(1, 1000), default=8, show_default=True,
              help="Tool attempts this worker runs at once.")
@_tools_option
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
            raise _usage("chainlang worker needs the Temporal SDK: pip install 'chainlang[temporal]'") from None
        from chainlang.engine.temporal.worker import run_worker

        def ready(text: str) -> None:
            click.echo(f"chainlang worker: {text}", err=True)

        run_loop(run_worker(Path.cwd(), concurrency=concurrency, tools=tools, ready=ready))
        return 0

    _guarded(body)


@main.command()
@click.option("--hooks", "hooks_file", is_flag=True, help="Print the schema of hooks files (*.hooks.yaml) instead.")
@click.option("--tests", "test_file", is_flag=True, help="Print the schema of test files (*.chaintest.yaml) instead.")
def schema(hooks_file: bool, test_file: bool) -> None:
    """Print the JSON Schema (draft-07) of chain files, of hooks files with --hooks, or of
    test files with --tests, for editors."""

    def body() -> int:
        from chainlang.resources import read_text

        if hooks_file and test_file:
            raise _usage("--hooks and --tests: give one of them (one schema is printed)")
        name = "hooks.schema.json" if hooks_file else "chaintest.schema.json" if test_file else "chain.schema.json"
        click.echo(read_text("schemas", name).rstrip("\n"))
        return 0

    _guarded(body)


@main.command()
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
            raise _usage("chainlang lsp needs the lsp extra: pip install 'chainlang[lsp]'") from None
        from chainlang.lsp import serve_stdio

        serve_stdio()
        return 0

    _guarded(body)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the registry as JSON.")
@_tools_option
def events(as_json: bool, tools: tuple[str, ...]) -> None:
    """List every registered event with its description."""

    def body() -> int:
        from chainlang.pipeline import project_registry
        from chainlang.tasks.stored import stored_hook_files
        from chainlang.registry.describe import events_json, events_text

        registry = project_registry(tools, stored_hooks=stored_hook_files)
        click.echo(events_json(registry) if as_json else events_text(registry))
        return 0

    _guarded(body)


@main.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the event as JSON.")
@_tools_option
def describe(name: str, as_json: bool, tools: tuple[str, ...]) -> None:
    """Describe one event: description, params and result schemas, effects."""

    def body() -> int:
        from chainlang.errors import UsageError
        from chainlang.pipeline import project_registry
        from chainlang.tasks.stored import stored_hook_files
        from chainlang.registry.describe import describe_json, describe_text

        registry = project_registry(tools, stored_hooks=stored_hook_files)
        spec = registry.get(name)
        if spec is None:
            guess = registry.suggest(name)
            raise UsageError(f"unknown event '{name}'" + (f"; did you mean '{guess}'?" if guess else "; see `chainlang events`"))
        click.echo(describe_json(spec) if as_json else describe_text(spec))
        return 0

    _guarded(body)


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="chainlang")
