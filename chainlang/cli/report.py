"""`chainlang report TRANSCRIPT`: write a run's report as one HTML file (chainlang.report)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from chainlang.errors import UsageError


def report_command(transcript: str, output: str | None) -> int:
    """Write the report next to the transcript (RUN.jsonl → RUN.html), to `output`, or to
    stdout (`-`); say where on stdout. A file that is not a readable transcript exits 1,
    naming the line and what is wrong with it. The chain's graph is shown for a chain of the project
    the command runs in (compiling it loads that project's tools)."""
    from chainlang.config.project import find_project_config
    from chainlang.errors import RegistryError
    from chainlang.report import report_html, report_of
    from chainlang.report.page import UnreadableTranscript
    from chainlang.runtime.resume import not_a_transcript

    source = Path(transcript)
    if source.is_dir():
        raise UsageError(not_a_transcript(transcript, "report"))
    try:
        config = find_project_config(Path.cwd())
    except RegistryError as exc:
        raise UsageError(str(exc)) from None
    try:
        page = report_of(source, trusted=config.root if config is not None else Path.cwd())
    except UnreadableTranscript as exc:  # the file's content is wrong, not the command: exit 1
        from chainlang.redaction import escape_surrogates

        click.echo(f"chainlang: error: {escape_surrogates(str(exc))}", err=True)
        return 1
    html = report_html(page)
    if output == "-":
        sys.stdout.write(html)
        return 0
    target = Path(output) if output else source.with_suffix(".html")
    if target.resolve() == source.resolve():
        raise UsageError(f"{target}: that is the transcript; give another file with -o")
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:  # whole or not at all: a browser reloading it never sees half a page
        partial.write_text(html, encoding="utf-8")
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise UsageError(f"{target}: cannot write the report: {exc.strerror or exc}") from None
    click.echo(str(target))
    return 0
