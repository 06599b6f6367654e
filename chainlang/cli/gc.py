"""`chainlang gc [PATH] [--keep N|AGE] [--dry-run] [--json]`: remove the transcripts of
ended runs beyond the retention (`--keep`, else `[runs] keep` of chainlang.toml), from the
project's runs directory (`[runs] dir`). What stays whatever its age, and why, is
chainlang.journal.retention's to say: runs that wait, were interrupted or are going."""

from __future__ import annotations

import json
from pathlib import Path

from chainlang.errors import UsageError
from chainlang.journal.retention import GcReport

__all__ = ["gc_command"]


def gc_command(path: str | None, keep: str | None, dry_run: bool, as_json: bool) -> int:
    from chainlang.config.project import find_project_config
    from chainlang.journal.retention import collect, parse_keep, runs_dir

    start = Path.cwd() if path is None else Path(path)
    if not start.is_dir():
        raise UsageError(f"{path}: not a directory; give the project's directory (where chainlang.toml is)")
    config = find_project_config(start)  # a bad chainlang.toml (e.g. its [runs] keep) is a ConfigError here
    root = Path(config.root) if config is not None else start
    given = keep if keep is not None else (config.runs.keep if config is not None and config.runs is not None
                                           else None)
    if given is None:
        raise UsageError("no retention to apply: give --keep N (the newest N ended runs) or --keep AGE (e.g. 30d), "
                         "or set keep in the [runs] table of chainlang.toml")
    try:
        retention = parse_keep(given)
    except UsageError as exc:
        where = "--keep" if keep is not None else "chainlang.toml: [runs] keep"
        message = str(exc)
        raise UsageError(where + message[len("keep"):] if message.startswith("keep") else f"{where}: {message}") from None
    assert retention is not None  # given is not None
    directory = runs_dir(config, root)
    report = collect(directory, retention, dry_run=dry_run)
    if as_json:
        print(json.dumps({"dry_run": dry_run, "directory": str(directory), **report.as_json()}, ensure_ascii=False))
        return 0
    verb = "would remove" if dry_run else "removed"
    for removed in report.removed:
        print(f"{verb} {_shown(removed, root)}")
    for orphan in report.orphans:
        print(f"{verb} {_shown(orphan, root)} (its transcript is gone)")
    print(_summary(report, verb, given))
    return 0


def _summary(report: GcReport, verb: str, keep: int | str) -> str:
    n = len(report.removed)
    parts = [f"{verb} {n} transcript{'s' if n != 1 else ''} of ended runs",
             f"kept {report.kept} within keep = {keep}"]
    if report.unfinished:
        parts.append(f"{len(report.unfinished)} unfinished (interrupted or waiting) kept")
    if report.live:
        parts.append(f"{len(report.live)} held by a running process kept")
    if report.orphans:
        parts.append(f"{verb} {len(report.orphans)} .head file{'s' if len(report.orphans) != 1 else ''} "
                     "without a transcript")
    return "; ".join(parts)


def _shown(path: str, root: Path) -> str:
    """A path as printed: relative to the project when inside it."""
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path
