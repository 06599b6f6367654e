"""The commands that read and tend the project's store: its event log, tasks, threads and
waits, and the removal of ended runs' transcripts (gc). What they do is in cli/log.py,
cli/tasks.py, cli/threads.py, cli/waits.py and cli/gc.py.

Imported at start (click needs the commands for `--help`): imports stay inside the commands.
"""

from __future__ import annotations

import click

from chainlang.cli.guard import guarded


@click.command()
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

    guarded(body)


@click.command()
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

    guarded(body)


@click.command()
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

    guarded(body)


@click.command()
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

    guarded(body)


@click.command()
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

    guarded(body)
