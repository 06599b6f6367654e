"""A run's report as one HTML page (`chainlang report`, serve's `/runs/ID/report`): read the
transcript (its seals verified when the project's key is at hand), work out what to show
(chainlang.report.model), add the chain's compiled graph, and render the page with the
templates of chainlang/report/templates in Jinja2's immutable sandbox, autoescaped.

The page needs no network: its style and script are inlined, and the data its script
shows when a step is opened is a JSON island (escaped so no value can end it).
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.errors import UsageError
from chainlang.report.model import RunReport, build

if TYPE_CHECKING:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from chainlang.journal.records import RunStarted

__all__ = ["Page", "UnreadableTranscript", "held", "report_html", "report_of", "templates"]

HERE = Path(__file__).resolve().parent
REFRESH = 3  # seconds between two loads of the report of a run under way, in serve


class UnreadableTranscript(UsageError):
    """A file that is not a transcript chainlang can read; the message names the file, the
    line and what is wrong with it. `chainlang report` exits 1 with it, serve answers 422."""


@dataclass
class Page:
    """What the report template is given."""

    report: RunReport
    graph: dict[str, Any] | None  # the compiled chain (chainlang graph --format json), when it can be shown
    graph_note: str | None  # why there is no graph
    source: str  # the transcript, as the reader named it


def held(transcript: Path) -> bool:
    """Whether a live process holds the transcript (its run is under way): its head file is
    locked. Read-only: nothing is written, unlike taking the lock."""
    from chainlang.journal.lock import head_path

    try:
        fd = os.open(head_path(transcript), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def report_of(path: Path, *, trusted: Path | None = None) -> Page:
    """The report of the transcript at `path`. The chain's graph is compiled only for a chain
    file inside `trusted` (the project `chainlang report` runs in, or serve's): compiling
    loads the project's tools, and a transcript is not trusted to name them. Raises
    UsageError for a file that is not a readable transcript."""
    from chainlang.journal.reader import TranscriptError, read_transcript

    notes = []
    key, why = _key(path)
    try:  # one reading, the seals checked along (the reading without them only when they fail)
        try:
            transcript = read_transcript(path, key=key)
        except TranscriptError as exc:
            if key is None:
                raise
            transcript = read_transcript(path)
            why = (f"The transcript's seals do not verify with its project's key: {exc}. It was changed after it "
                   "was written; what it says may not be what ran.")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except TranscriptError as exc:
        raise UnreadableTranscript(f"not a transcript chainlang can read: {exc}") from None
    if transcript.torn_tail:
        notes.append("The transcript's last line was cut off while it was written (a crash or a kill); it is "
                     "not shown.")
    if why:
        notes.append(why)
    report = build(transcript.records, held=held(path), notes=notes)
    graph, graph_note = _graph(transcript.started, trusted)
    if trusted is not None and report.summary.get("file"):  # the project's files by their names in it
        try:
            inside = Path(report.summary["file"]).resolve().relative_to(trusted.resolve())
            report.summary["file"] = inside.as_posix() or "."
        except (ValueError, OSError):
            pass
    return Page(report, graph, graph_note, str(path))


def _key(path: Path) -> tuple[bytes | None, str | None]:
    """The key of the project that ran the transcript's run (found from the file its first
    record names), or None and why not."""
    from chainlang.config.project import find_project_config
    from chainlang.journal.integrity import IntegrityError, load_key
    from chainlang.errors import RegistryError

    missing = "Not verified: the project's transcript key is not where the run's file is; shown as it is."
    try:
        with path.open("rb") as f:
            started = json.loads(f.readline(1024 * 1024))
        start = Path(str(started.get("file", "")))
        start = start if started.get("emit") else start.parent
        config = find_project_config(start) if start.is_dir() else None
        return load_key(config.root if config is not None else start, create=False), None
    except (IntegrityError, RegistryError, OSError, ValueError, AttributeError, RecursionError):
        return None, missing


def _graph(started: "RunStarted", trusted: Path | None) -> tuple[dict[str, Any] | None, str | None]:
    """The compiled graph of the run's chain (as `chainlang graph --format json` gives it), or
    why it is not shown."""
    from chainlang.compile.render import to_json
    from chainlang.runtime.prepare import prepare

    if started.emit:
        return None, "An emit runs the hooks of its event, not a chain: their actions are in the timeline."
    file = Path(started.file)
    try:
        inside = trusted is not None and file.resolve().is_relative_to(trusted.resolve())
        there = inside and file.is_file()
    except OSError as exc:  # a name too long for the file system, a loop of links...: the transcript's word
        return None, f"The chain file {_shown(file)} cannot be looked at: {exc.strerror or exc}."
    if not inside:
        return None, (f"The chain file {_shown(file)} is not in this project: run chainlang report in its project to "
                      "see its graph.")
    if not there:
        return None, f"The chain file {file} is not there any more."
    try:
        prepared = prepare(file)
    except UsageError as exc:
        return None, f"The chain file {file} cannot be loaded now: {exc}"
    if prepared.digest != started.file_sha256:
        return None, f"The chain file {file} has changed since the run (its sha256 differs): its graph now would not be the one that ran."
    if prepared.graph is None:
        return None, f"The chain file {file} has check errors now."
    return dict(json.loads(to_json(prepared.graph))), None


def _shown(path: Path, limit: int = 300) -> str:
    text = str(path)
    return text if len(text) <= limit else text[:limit] + "…"


def templates() -> "ImmutableSandboxedEnvironment":
    """The page templates, autoescaped, in the immutable sandbox (a template can only show)."""
    from jinja2 import FileSystemLoader, StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(loader=FileSystemLoader(HERE / "templates"), autoescape=True,
                                        undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["ms"] = ms_text
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
    env.globals["asset"] = lambda name: (HERE / "assets" / name).read_text(encoding="utf-8")
    return env


def report_html(page: Page, *, live: bool = False, home: str | None = None, nonce: str | None = None) -> str:
    """The page. `live`: served by serve, reloading itself while the run is under way; `home`:
    the link back to serve's list of runs; `nonce`: the one its script runs under (its
    Content-Security-Policy allows no other script and no network)."""
    import secrets

    from chainlang.redaction import escape_surrogates

    report = page.report
    statuses = _statuses(report)
    # a lone surrogate (a transcript keeps one \u-escaped) shown as its escape: the page is UTF-8
    return escape_surrogates(templates().get_template("report.html.j2").render(
        page=page, report=report, details=report.details(), statuses=statuses, ticks=ticks(report.span_ms),
        refresh=REFRESH if live and report.status == "running" else None, home=home,
        nonce=nonce or secrets.token_urlsafe(16),
        made=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")))


def _statuses(report: RunReport) -> dict[str, str]:
    """The status of each graph node's steps in this run, by the node's path: how its last
    attempt ended (a retry that succeeded is ok), the worst of its items' for a foreach,
    and of its sub-chain's steps."""
    rank = {"failed": 5, "interrupted": 4, "timed_out": 4, "running": 3, "waiting": 3, "cancelled": 2, "ok": 1,
            "skipped": 0}
    last: dict[str, str] = {}
    for attempt in report.attempts:  # in order: the last attempt of each step path wins
        last[attempt["step"]] = attempt["status"]
    out: dict[str, str] = {}
    for step, status in last.items():
        node = step.split("/")[0].split("[")[0].split("#")[0]  # 3[0].1, 3#2.1 (a repeat's pass): node 3
        if node not in out or rank.get(status, 0) > rank.get(out[node], 0):
            out[node] = status
    return out


def ticks(span: float) -> list[tuple[float, str]]:
    """About eight marks on the time axis: (percent, label)."""
    raw = span / 8
    step = 1.0
    for unit in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000,
                 120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000,
                 86_400_000):
        step = unit
        if unit >= raw:
            break
    marks: list[tuple[float, str]] = []
    at = 0.0
    while at <= span and len(marks) < 200:
        marks.append((at / span * 100, ms_text(at)))
        at += step
    return marks


def ms_text(ms: Any) -> str:
    """A duration for people: 0.4 ms, 12 ms, 1.25 s, 3 m 20 s, 2 h 05 m."""
    if not isinstance(ms, (int, float)):
        return ""
    if ms < 10:
        return f"{ms:.1f} ms" if ms % 1 else f"{ms:.0f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.2f}".rstrip("0").rstrip(".") + " s"
    if ms < 3_600_000:
        return f"{int(ms // 60_000)} m {int(ms % 60_000 // 1000):02d} s"
    return f"{int(ms // 3_600_000)} h {int(ms % 3_600_000 // 60_000):02d} m"
