"""The options several commands share, one definition each so that their help reads the same."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def tools_option(fn: F) -> F:
    return click.option(
        "--tools",
        "tools",
        multiple=True,
        metavar="MODULE_OR_FILE",
        help="A Python module name or .py file whose @event tools are registered (repeatable).",
    )(fn)


PROGRESS_OPTION = click.option(
    "--progress", type=click.Choice(("auto", "plain", "rich", "quiet")), default="auto", show_default=True,
    help="Progress on stderr: live (rich) on a terminal, plain lines otherwise.")
JSON_OUTPUTS_OPTION = click.option(
    "--json", "as_json", is_flag=True,
    help="Print the run's outputs as one JSON object on stdout (progress goes to stderr).")
PROGRESS_COLOR_OPTION = click.option(
    "--color/--no-color", default=None, help="Colour the progress (default: when stderr is a terminal).")
DETACH_OPTION = click.option(
    "--detach", is_flag=True,
    help="At the first wait, end with exit 4 (status waiting) instead of waiting here: the event "
         "(through chainlang serve) or the deadline continues the run.")
ANSWER_OPTION = click.option(
    "--answer", "answers", multiple=True, metavar="ID=VALUE",
    help="Answer the user.ask step with this id (or path) when it asks (repeatable); VALUE is "
         "parsed as JSON when it parses, else taken as text; checked against its choices.")
