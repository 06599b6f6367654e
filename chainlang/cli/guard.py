"""The guard every command body runs under: usage errors and anything unexpected end in one
line on stderr (exit 2), never in a traceback (CHAINLANG_DEBUG=1 shows it).

Imported at start by every command module: imports stay lazy so that `chainlang --help` is fast.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, NoReturn

import click


def usage_exit(message: str) -> NoReturn:
    from chainlang.redaction import escape_surrogates

    click.echo(f"chainlang: error: {escape_surrogates(message)}", err=True)
    sys.exit(2)


def usage_error(message: str) -> Exception:
    from chainlang.errors import UsageError

    return UsageError(message)


def guarded(fn: Callable[[], int]) -> None:
    """Run a command body: usage errors exit 2 with one line; so does anything unexpected."""
    from chainlang.errors import UsageError

    try:
        code = fn()
    except UsageError as exc:
        from chainlang.cli.words import cli_message

        usage_exit(cli_message(exc))
    except (KeyboardInterrupt, BrokenPipeError):
        sys.exit(130 if sys.exc_info()[0] is KeyboardInterrupt else 0)
    except (SystemExit, click.exceptions.Exit, click.ClickException):
        raise
    except Exception as exc:  # an internal error must still not print a traceback
        if os.environ.get("CHAINLANG_DEBUG"):
            raise
        usage_exit(f"internal error: {type(exc).__name__}: {exc} (set CHAINLANG_DEBUG=1 for a traceback, and please report it)")
    sys.exit(code)
