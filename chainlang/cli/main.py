"""The `chainlang` command: the click group, `--version`, and the commands of the modules
commands_check, commands_runs, commands_store and commands_servers. Imports are lazy:
`--help` must stay fast.

No input, however malformed, may end in a Python traceback: unexpected exceptions are
reported in one line (exit 2), with the traceback only under CHAINLANG_DEBUG=1 (cli/guard.py).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from chainlang.cli.commands_check import check, describe, events, graph, schema
from chainlang.cli.commands_runs import emit, report, resume, run
from chainlang.cli.commands_servers import lsp, serve, worker
from chainlang.cli.commands_store import gc, log, tasks, threads, waits
from chainlang.cli.guard import usage_exit


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


def _help_width() -> int:
    """The width click's help takes, found as click finds it but without `shutil` (whose
    import, with its compression modules, was 3 % of a cold `--help`): COLUMNS, else
    the terminal's width, else 80; at most 80, less a margin of 2, at least 50."""
    from click import formatting

    if formatting.FORCED_WIDTH is not None:  # click's CliRunner sets it
        return formatting.FORCED_WIDTH
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return max(min(columns if columns > 0 else 80, 80) - 2, 50)


class _Group(click.Group):
    """Usage errors from click itself get the same one-line form (and exit 2) as ours."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        extra.setdefault("terminal_width", _help_width())  # the commands' contexts inherit it
        return super().make_context(info_name, args, parent, **extra)

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
            usage_exit(f"{exc.format_message()} (see '{command} --help')")
        except click.exceptions.Abort:
            sys.exit(130)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from chainlang.version import describe as describe_version

    click.echo(describe_version())
    ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version and the commit it comes from, and exit.")
def main() -> None:
    """chainlang: check and run declarative YAML event chains."""


# the order they were written in when they all lived here; `--help` lists them sorted anyway
for _command in (check, graph, run, resume, emit, report, log, tasks, threads, waits, gc, serve, worker, schema, lsp,
                 events, describe):
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="chainlang")
