"""The commands that run chains and read their runs: run, resume, emit (the project's post:
hooks, here or through a serve) and report. What they do is in cli/run.py, cli/post.py and
cli/report.py.

Imported at start (click needs the commands for `--help`): imports stay inside the commands.
"""

from __future__ import annotations

import click

from chainlang.cli.guard import guarded, usage_error
from chainlang.cli.options import (ANSWER_OPTION, DETACH_OPTION, JSON_OUTPUTS_OPTION, PROGRESS_COLOR_OPTION,
                                   PROGRESS_OPTION, tools_option)


@click.command()
@click.argument("file", type=click.Path())
@click.option("--input", "inputs", multiple=True, metavar="NAME=VALUE",
              help="A chain input (repeatable); VALUE is parsed as JSON when it parses, else taken as text.")
@JSON_OUTPUTS_OPTION
@click.option("--transcript", type=click.Path(), default=None,
              help="Where to write the JSONL transcript (default: .chainlang/runs/RUN_ID.jsonl in the project).")
@click.option("--now", default=None, metavar="ISO-8601", help="Pin the run's clock, e.g. 2025-01-15T09:30:00+01:00.")
@click.option("--thread", default=None, metavar="ID",
              help="Attach the run to a stored thread: each step's result is added to it (see chainlang threads).")
@DETACH_OPTION
@ANSWER_OPTION
@tools_option
@PROGRESS_OPTION
@PROGRESS_COLOR_OPTION
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

    guarded(body)


@click.command()
@click.argument("transcript", type=click.Path())
@JSON_OUTPUTS_OPTION
@tools_option
@click.option("--rerun", multiple=True, metavar="STEP",
              help="Run this unfinished non-idempotent step again (you checked it did not take effect).")
@click.option("--skip", multiple=True, metavar="STEP", help="Go on without this unfinished non-idempotent step.")
@DETACH_OPTION
@ANSWER_OPTION
@PROGRESS_OPTION
@PROGRESS_COLOR_OPTION
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

    guarded(body)


@click.command()
@click.argument("name")
@click.option("--data", "data", default="{}", show_default=True, metavar="JSON",
              help="The event's payload, a JSON object; it must match the payload declared for the event.")
@click.option("--id", "key", default=None, metavar="KEY",
              help="An idempotency key: the same KEY emitted again in this project fires nothing.")
@JSON_OUTPUTS_OPTION
@click.option("--transcript", type=click.Path(), default=None,
              help="Where to write the JSONL transcript (default: .chainlang/runs/RUN_ID.jsonl in the project).")
@click.option("--now", default=None, metavar="ISO-8601", help="Pin the clock the hooks' actions read.")
@click.option("--to", "to", default=None, metavar="URL",
              help="Post the event to a running chainlang serve (its base URL, http://HOST:PORT) instead.")
@click.option("--no-wait", is_flag=True, help="With --to: return once serve has recorded the event (202).")
@tools_option
@PROGRESS_OPTION
@PROGRESS_COLOR_OPTION
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
                raise usage_error("--to posts to a serve: --transcript, --now and --tools are the serve's own")
            return post_command(to, name, data, key, as_json, not no_wait, color)
        from chainlang.cli.run import emit_command

        if no_wait:
            raise usage_error("--no-wait goes with --to")
        return emit_command(name, data, key, as_json, transcript, now, tools, progress, color)

    guarded(body)


@click.command()
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

    guarded(body)
