"""The commands about chain and hooks files before anything runs: check, graph, schema, and
the event registry (events, describe). Exit codes of `check`: 0 no errors, 1 errors found,
2 usage or internal error.

Imported at start (click needs the commands for `--help`): imports stay inside the commands.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from chainlang.cli.guard import guarded, usage_error
from chainlang.cli.options import tools_option

FORMATS = ("text", "json", "github", "sarif")


def _use_color(stream: Any) -> bool:
    from chainlang.output.terminal import use_color

    return use_color(stream)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, help="Output format.")
@tools_option
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

    guarded(body)


@click.command()
@click.argument("file", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(("mermaid", "dot", "json")), default="mermaid", show_default=True,
              help="Output format.")
@tools_option
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

    guarded(body)


@click.command()
@click.option("--hooks", "hooks_file", is_flag=True, help="Print the schema of hooks files (*.hooks.yaml) instead.")
@click.option("--tests", "test_file", is_flag=True, help="Print the schema of test files (*.chaintest.yaml) instead.")
def schema(hooks_file: bool, test_file: bool) -> None:
    """Print the JSON Schema (draft-07) of chain files, of hooks files with --hooks, or of
    test files with --tests, for editors."""

    def body() -> int:
        from chainlang.resources import read_text

        if hooks_file and test_file:
            raise usage_error("--hooks and --tests: give one of them (one schema is printed)")
        name = "hooks.schema.json" if hooks_file else "chaintest.schema.json" if test_file else "chain.schema.json"
        click.echo(read_text("schemas", name).rstrip("\n"))
        return 0

    guarded(body)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the registry as JSON.")
@tools_option
def events(as_json: bool, tools: tuple[str, ...]) -> None:
    """List every registered event with its description."""

    def body() -> int:
        from chainlang.pipeline import project_registry
        from chainlang.tasks.stored import stored_hook_files
        from chainlang.registry.describe import events_json, events_text

        registry = project_registry(tools, stored_hooks=stored_hook_files)
        click.echo(events_json(registry) if as_json else events_text(registry))
        return 0

    guarded(body)


@click.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the event as JSON.")
@tools_option
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

    guarded(body)
