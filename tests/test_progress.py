"""The live progress display of `chainlang run` (the package chainlang/output/progress/)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from chainlang.journal.records import (
    Clock,
    Decide,
    HookDropped,
    HookFinished,
    HookFired,
    Record,
    RunFinished,
    RunStarted,
    StepFinished,
    StepProgress,
    StepStarted,
)
from chainlang.output.progress import (
    MAX_TEXT,
    PlainProgress,
    QuietProgress,
    RichProgress,
    make_progress,
)
from chainlang.redaction import Redactor

REPO = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

HOSTILE = "evil\x1b[2J\x1b]0;title\x07\rover\nwritten\u202egnp.exe\u2066x\u2069\u2028y\ud800z\x85"


CLASSES = {cls.TYPE: cls for cls in (RunStarted, StepStarted, StepProgress, Decide, HookFired, HookFinished, HookDropped,
                                     StepFinished, RunFinished, Clock)}


class Seq:
    """Typed records, as the interpreter hands them over; required members not given are
    None (the views read only some), and no value is checked (the views tolerate odd ones)."""

    def __call__(self, type_: str, **fields: Any) -> Record:
        cls = CLASSES[type_]
        for f in dataclasses.fields(cls):
            if f.default is dataclasses.MISSING:
                fields.setdefault(f.name, None)
        record: Record = cls(**fields)
        return record


def sample_run() -> list[Record]:
    r = Seq()
    return [
        r("run_started", chain="greet", file="chains/greet.yaml", inputs={"who": "x"}, now=None, resumed=False),
        r("step_started", step="1", event="tools.now", attempt=1, params={}),
        r("clock", value="2025-01-02T03:04:05Z"),
        r("step_finished", step="1", event="tools.now", status="ok", result="t", error=None, duration_ms=0.42, attempt=1),
        r("step_started", step="2", event="web.fetch", attempt=1, params={"url": "u"}),
        r("step_progress", step="2", event="web.fetch", message="downloading", fraction=0.4),
        r("step_progress", step="2", event="web.fetch", message="downloading", fraction=0.45),  # same 10 %: not repeated
        r("step_progress", step="2", event="web.fetch", message="downloading", fraction=0.5),
        r("step_progress", step="2", event="web.fetch", message="parsing", fraction=None),
        r("step_finished", step="2", event="web.fetch", status="failed", result=None,
          error={"type": "TimeoutError", "message": "timed out after 5 s"}, duration_ms=5003.2, attempt=1),
        r("step_started", step="2", event="web.fetch", attempt=2, params={"url": "u"}, max_attempts=3),
        r("step_finished", step="2", event="web.fetch", status="ok", result={}, error=None, duration_ms=1234.5, attempt=2),
        r("hook_fired", hook="on_error", when="post", event="web.fetch", step="2"),
        r("hook_finished", hook="on_error", status="failed", error={"type": "chain", "message": "no mailbox"},
          duration_ms=2.0, step="2"),
        r("hook_dropped", hook="audit", when="post", event="web.fetch", reason="single", message="still running",
          step="2"),
        r("decide", step="3", event="email.send", action="skip", reason="condition `x` is false", source="embedded"),
        r("step_finished", step="3", event="email.send", status="skipped", result=None, error=None, duration_ms=0.1, attempt=1),
        r("step_started", step="2[0].1", event="tools.sleep", attempt=1, params={}),
        r("step_finished", step="2[0].1", event="tools.sleep", status="cancelled", result=None, error=None, duration_ms=75_000.0, attempt=1),
        r("step_finished", step="4/1", event="tools.now", status="ok", result=None, error=None, duration_ms=3.0, attempt=1),
        r("run_finished", status="ok", outputs={"a": 1}, error=None, duration_ms=12.34),
    ]


SAMPLE_PLAIN = """\
▶ run greet (chains/greet.yaml)
✓ 1 tools.now 0.4 ms
… 2 web.fetch 40% downloading
… 2 web.fetch 50% downloading
… 2 web.fetch parsing
✗ 2 web.fetch failed: timed out after 5 s
↻ 2 web.fetch retry 2/3
✓ 2 web.fetch 1.23 s
↳ hook on_error at 2 fired on post:web.fetch
✗ hook on_error at 2 failed: no mailbox
- hook audit at 2 dropped (single: still running)
? 3 email.send decide: skip (condition `x` is false)
- 3 email.send skipped
⊘ 2[0].1 tools.sleep cancelled
✓ 4/1 tools.now 3.0 ms
run ok in 12.3 ms
"""


def run_plain(records: list[Any], stream: Any = None, **kwargs: Any) -> str:
    stream = io.StringIO() if stream is None else stream
    view = make_progress(stream, "plain", **kwargs)
    for rec in records:
        view.record(rec)
    view.close()
    if isinstance(stream, io.StringIO):
        return stream.getvalue()
    stream.flush()
    return str(stream.buffer.getvalue().decode(stream.encoding))


# -- plain ------------------------------------------------------------------------------


def test_plain_lines() -> None:
    assert run_plain(sample_run(), color=False) == SAMPLE_PLAIN


def test_plain_run_start_and_finish_variants() -> None:
    r = Seq()
    out = run_plain(
        [
            r("run_started", chain=None, file="a.yaml", inputs={}, now="2025-01-02T03:04:05Z", resumed=True),
            r("step_progress", step="1", event="e.v", message="", fraction=1.0),
            r("step_finished", step="1", event="e.v", status="failed", result=None, error={"type": "KeyError", "message": ""}, duration_ms=1, attempt=1),
            r("step_finished", step="2", event="e.v", status="failed", result=None, error=None, duration_ms=1, attempt=1),
            r("step_finished", step="3", event="e.v", status="skipped", result=None, error=None, duration_ms=0, attempt=1, reason="if: false"),
            r("step_started", step="1", event="e.v", attempt=3, params={}),
            r("run_finished", status="failed", outputs=None, error={"type": "StepFailed", "message": "step 1 failed"}, duration_ms=61_500),
            r("run_finished", status="interrupted", outputs=None, error=None, duration_ms=3_725_000),
        ],
        color=False,
    )
    assert out.splitlines() == [
        "▶ resume a.yaml, clock pinned to 2025-01-02T03:04:05Z",
        "… 1 e.v 100%",
        "✗ 1 e.v failed: KeyError",
        "✗ 2 e.v failed",
        "- 3 e.v skipped (if: false)",
        "↻ 1 e.v retry 3",
        "run failed: step 1 failed (1m 02s)",
        "run interrupted after 1h 02m 05s",
    ]


@pytest.mark.parametrize(
    ("ms", "text"),
    [(0, "0.0 ms"), (0.44, "0.4 ms"), (12.34, "12.3 ms"), (999.9, "999.9 ms"), (999.96, "1.00 s"), (1234.5, "1.23 s"),
     (59_999, "1m 00s"), (125_000, "2m 05s"), (3_725_000, "1h 02m 05s"), (None, ""), (-1, ""), (float("nan"), ""), ("3", ""), (True, "")],
)
def test_durations(ms: object, text: str) -> None:
    r = Seq()
    out = run_plain([r("step_finished", step="1", event="e", status="ok", result=None, error=None, duration_ms=ms, attempt=1)])
    assert out == f"✓ 1 e {text}".rstrip() + "\n"


def test_odd_records_are_tolerated() -> None:
    r = Seq()
    out = run_plain(
        [
            {"type": "step_finished", "step": "1", "event": "e", "status": "ok", "duration_ms": 1.0},  # not a record
            {},
            None,
            object(),
            r("clock", value="2025-01-02T03:04:05Z"),
            r("hook_fired", hook="h", when="after", event="e"),
            r("step_finished"),
            r("step_finished", step=3, event=["x"], status="weird", duration_ms="fast"),
            r("step_progress", step=None, fraction=float("inf"), message=42),
            r("step_started", step="1", attempt="2"),
            r("decide"),
            r("run_started"),
            r("run_finished"),
        ],
        color=False,
    )
    assert out.splitlines() == [
        "↳ hook h fired on after:e",
        "•   finished",
        "• 3 ['x'] weird",
        "…   42",
        "?   decide: ",
        "▶ run",
        "run finished",
    ]


def test_quiet_prints_nothing() -> None:
    class Exploding(io.StringIO):
        def write(self, s: str) -> int:
            raise AssertionError("quiet wrote")

    view = make_progress(Exploding(), "quiet")
    assert isinstance(view, QuietProgress)
    for rec in sample_run():
        view.record(rec)
    view.close()


def test_unknown_mode() -> None:
    with pytest.raises(ValueError, match="unknown progress mode"):
        make_progress(io.StringIO(), "loud")  # type: ignore[arg-type]


# -- hostile text -----------------------------------------------------------------------


def hostile_run() -> list[Record]:
    r = Seq()
    return [
        r("run_started", chain=HOSTILE, file=HOSTILE, inputs={}, now=None, resumed=False),
        r("step_started", step="1", event=HOSTILE, attempt=2, params={}),
        r("step_progress", step="1" + HOSTILE, event="e", message=HOSTILE, fraction=0.5),
        r("decide", step="1", event="e", action=HOSTILE, reason=HOSTILE * 100, source="x"),
        r("step_finished", step="1", event="e", status="failed", result=HOSTILE, error={"type": "E", "message": HOSTILE * 1000}, duration_ms=1, attempt=1),
        r("step_finished", step=HOSTILE, event="e", status=HOSTILE, result=None, error=None, duration_ms=1, attempt=1),
        r("run_finished", status="failed", outputs=None, error={"type": "E", "message": HOSTILE}, duration_ms=1),
    ]


def assert_harmless(text: str) -> None:
    for ch in text:
        if ch == "\n":
            continue
        assert ch.isprintable() or ch == " ", f"{ch!r} reached the stream"
    assert "\u202e" not in text and "\u2066" not in text
    for line in text.splitlines():
        assert len(line) < MAX_TEXT + 3 * 80 + 40, line


@pytest.mark.parametrize("color", [False, True])
def test_plain_escapes_hostile_text(color: bool) -> None:
    out = run_plain(hostile_run(), color=color)
    assert len(out.splitlines()) == 7  # every record still one line
    assert_harmless(ANSI.sub("", out))
    assert "\\x1b[2J" in out and "\\u202e" in out and "\\x07" in out
    assert "\\ud800" in out  # a lone surrogate cannot break a UTF-8 stream
    assert "over written" in out  # newlines and other line breaks become spaces
    assert out.count("\x1b[") == (0 if not color else out.count("\x1b[0m") * 2)  # only our own colours


def test_long_messages_are_cut() -> None:
    r = Seq()
    out = run_plain([r("step_progress", step="1", event="e", message="word " * 10_000, fraction=None)])
    assert out.endswith("…\n")
    assert len(out) < MAX_TEXT + 20


# -- encodings --------------------------------------------------------------------------


def test_ascii_fallback() -> None:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    out = run_plain(sample_run(), stream, color=False)
    assert out.splitlines() == [
        "> run greet (chains/greet.yaml)",
        "+ 1 tools.now 0.4 ms",
        "... 2 web.fetch 40% downloading",
        "... 2 web.fetch 50% downloading",
        "... 2 web.fetch parsing",
        "x 2 web.fetch failed: timed out after 5 s",
        "~ 2 web.fetch retry 2/3",
        "+ 2 web.fetch 1.23 s",
        "^ hook on_error at 2 fired on post:web.fetch",
        "x hook on_error at 2 failed: no mailbox",
        "- hook audit at 2 dropped (single: still running)",
        "? 3 email.send decide: skip (condition `x` is false)",
        "- 3 email.send skipped",
        "/ 2[0].1 tools.sleep cancelled",
        "+ 4/1 tools.now 3.0 ms",
        "run ok in 12.3 ms",
    ]


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp1252"])
def test_narrow_encodings_never_fail(encoding: str) -> None:
    r = Seq()
    stream = io.TextIOWrapper(io.BytesIO(), encoding=encoding)  # errors="strict"
    out = run_plain(
        [
            *hostile_run(),
            r("step_progress", step="1", event="e", message="café ✓ 日本 " + "é" * 500, fraction=None),
        ],
        stream,
        color=False,
    )
    assert "caf" in out and "\\u2713" in out and "\\u65e5" in out
    assert out.splitlines()[-1].endswith("...")
    assert_harmless(out)


def test_utf8_stream_keeps_unicode() -> None:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    r = Seq()
    out = run_plain([r("step_progress", step="1", event="e", message="café ✓ 日本", fraction=None)], stream)
    assert out == "… 1 e café ✓ 日本\n"


# -- colour -----------------------------------------------------------------------------


def test_color_flag() -> None:
    assert "\x1b[" not in run_plain(sample_run(), color=False)
    colored = run_plain(sample_run(), color=True)
    assert "\x1b[32m✓\x1b[0m 1 tools.now" in colored
    assert "\x1b[1;31mfailed\x1b[0m" in colored
    assert ANSI.sub("", colored) == SAMPLE_PLAIN


@pytest.mark.parametrize(
    ("env", "tty", "expected"),
    [({}, False, False), ({}, True, True), ({"NO_COLOR": "1"}, True, False), ({"FORCE_COLOR": "1"}, False, True), ({"FORCE_COLOR": "0"}, False, False)],
)
def test_color_default_follows_the_cli(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], tty: bool, expected: bool) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    stream = Stream()
    view = make_progress(stream, "plain")
    view.record(sample_run()[3])
    view.close()
    assert ("\x1b[" in stream.getvalue()) is expected


# -- choosing the view ------------------------------------------------------------------


class FakeTTY(io.StringIO):
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def test_auto_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TERM", raising=False)
    assert isinstance(make_progress(io.StringIO()), PlainProgress)
    view = make_progress(FakeTTY(), color=False)
    try:
        assert isinstance(view, RichProgress)
    finally:
        view.close()
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(make_progress(FakeTTY(), color=False), PlainProgress)


def test_rich_missing_falls_back_to_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("rich", "rich.console", "rich.live"):
        monkeypatch.setitem(sys.modules, name, None)  # import rich... raises ImportError
    stream = io.StringIO()
    view = make_progress(stream, "rich", color=False)
    assert isinstance(view, PlainProgress)
    for rec in sample_run():
        view.record(rec)
    view.close()
    assert stream.getvalue() == SAMPLE_PLAIN


def test_importing_the_module_does_not_import_rich() -> None:
    code = (
        "import io, sys\n"
        "import chainlang.output.progress as p\n"
        "from chainlang.journal.records import StepFinished\n"
        "for mode in ('plain', 'quiet', 'auto'):\n"
        "    v = p.make_progress(io.StringIO(), mode)\n"
        "    v.record(StepFinished('1', 'e', 'ok', None, None, 1.0, 1))\n"
        "    v.close()\n"
        "loaded = sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.'))\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stdout + proc.stderr


# -- flushing and performance -------------------------------------------------------------


class CountingStream(io.StringIO):
    def __init__(self, tty: bool = False) -> None:
        super().__init__()
        self.tty = tty
        self.flushes = 0

    def isatty(self) -> bool:
        return self.tty

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def big_run(steps: int) -> list[Record]:
    r = Seq()
    records = [r("run_started", chain="big", file="big.yaml", inputs={}, now=None, resumed=False)]
    for i in range(steps):
        step = str(i + 1)
        records.append(r("step_started", step=step, event="tools.now", attempt=1, params={}))
        records.append(r("clock", value="2025-01-02T03:04:05Z"))
        records.append(r("step_finished", step=step, event="tools.now", status="ok", result=i, error=None, duration_ms=0.05, attempt=1))
    records.append(r("run_finished", status="ok", outputs={}, error=None, duration_ms=500.0))
    return records


def test_pipe_flushes_only_at_the_run_edges_and_on_failure() -> None:
    records = big_run(1000)
    stream = CountingStream()
    view = PlainProgress(stream)
    view.FLUSH_INTERVAL = 3600.0  # no time-based flush during the test
    for rec in records[:-1]:
        view.record(rec)
    assert stream.flushes == 1  # the run_started line
    view.record(Seq()("step_finished", step="9", event="e", status="failed", result=None, error={"type": "E", "message": "m"}, duration_ms=1, attempt=1))
    assert stream.flushes == 2
    view.record(records[-1])
    assert stream.flushes == 3
    view.close()
    assert len(stream.getvalue().splitlines()) == 1003


def test_pipe_flushes_at_least_every_interval() -> None:
    stream = CountingStream()
    view = PlainProgress(stream)
    view.FLUSH_INTERVAL = 0.0
    for rec in big_run(10)[1:-1]:
        view.record(rec)
    assert stream.flushes == 10


def test_terminal_flushes_every_line() -> None:
    stream = CountingStream(tty=True)
    view = PlainProgress(stream)
    for rec in big_run(10):
        view.record(rec)
    assert stream.flushes == 12


def test_plain_prints_one_line_per_finished_step_of_a_long_run() -> None:
    # its speed is measured by benchmarks/run_bench.py, not asserted here
    records = big_run(10_000)
    stream = io.StringIO()
    view = make_progress(stream, "plain", color=False)
    for rec in records:
        view.record(rec)
    view.close()
    assert len(stream.getvalue().splitlines()) == 10_002


def test_broken_stream_silences_the_view() -> None:
    class Broken(io.StringIO):
        writes = 0

        def write(self, s: str) -> int:
            Broken.writes += 1
            raise BrokenPipeError

    view = make_progress(Broken(), "plain", color=False)
    for rec in sample_run():
        view.record(rec)
    view.close()
    assert Broken.writes == 1


def test_progress_memory_is_bounded() -> None:
    view = PlainProgress(io.StringIO())
    r = Seq()
    for i in range(20_000):  # steps that report progress and never finish
        view.record(r("step_progress", step=str(i), event="e", message="m", fraction=None))
    assert len(view._shown) <= PlainProgress._MAX_TRACKED


def test_records_from_several_threads() -> None:
    stream = io.StringIO()
    view = make_progress(stream, "plain", color=False)

    def work(n: int) -> None:
        for i in range(500):
            view.record(StepFinished(f"{n}.{i}", "e", "ok", None, None, 1.0, 1))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    view.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2000 and all(re.fullmatch(r"✓ \d\.\d+ e 1\.0 ms", line) for line in lines)


def test_ok_text_is_the_ok_line() -> None:
    """The fast ok line (`ok_text`) says exactly what the general `finished(rec, "ok")` says."""
    from chainlang.output.progress import _Formatter

    names: list[object] = ["1", "2[0].1", "tools.now", "x" * 300, HOSTILE, "é", None, 42, ""]
    durations: list[object] = [0.0, 0.42, 999.96, 61_000.0, -1.0, float("nan"), None, "3", 12]
    for encoding in ("utf-8", "ascii", "latin-1"):
        fmt = _Formatter(encoding)
        for step in names:
            for event in names:
                for duration in durations:
                    rec = StepFinished(step, event, "ok", None, None, duration, 1)  # type: ignore[arg-type]
                    assert fmt.ok_text(rec) == "".join(part for part, _ in fmt.finished(rec, "ok")), rec


def test_pipe_lines_are_written_within_the_interval_by_the_loop() -> None:
    """In an event loop (where the interpreter emits), a loop timer writes lines that no later
    line flushed: a CI log shows a step's line while the next step is still running."""
    import asyncio

    stream = CountingStream()
    view = PlainProgress(stream)
    view.FLUSH_INTERVAL = 0.02
    view.WATCH_INTERVAL = 3600.0  # only the loop's timer can write the line

    async def main() -> bool:
        view.record(big_run(1)[3])  # the step_finished line
        assert stream.getvalue() == ""  # collected, not written yet
        deadline = time.monotonic() + 30
        while not stream.getvalue() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return stream.getvalue() == "✓ 1 tools.now 0.1 ms\n"

    try:
        assert asyncio.run(main())
    finally:
        view.close()


def test_pipe_lines_are_written_by_the_watching_thread_without_a_loop() -> None:
    stream = CountingStream()
    view = PlainProgress(stream)
    view.FLUSH_INTERVAL = 0.02
    view.WATCH_INTERVAL = 0.02
    view.record(big_run(1)[3])
    deadline = time.monotonic() + 30
    while not stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    view.close()
    assert stream.getvalue() == "✓ 1 tools.now 0.1 ms\n"
    assert stream.flushes == 1


def test_a_view_never_closed_is_flushed_at_exit() -> None:
    code = (
        "import sys\n"
        "from chainlang.output.progress import PlainProgress\n"
        "from chainlang.journal.records import StepFinished\n"
        "view = PlainProgress(sys.stderr)\n"
        "view.FLUSH_INTERVAL = view.WATCH_INTERVAL = 3600.0\n"
        "for i in range(3):\n"
        "    view.record(StepFinished(str(i), 'e', 'ok', None, None, 1.0, 1))\n"
        "print('exit', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          encoding="utf-8")
    assert proc.returncode == 0 and proc.stdout == "exit\n", proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == ["✓ 0 e 1.0 ms", "✓ 1 e 1.0 ms", "✓ 2 e 1.0 ms"], proc.stderr


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signalled_cli_run_writes_its_collected_lines(tmp_path: Path, sig: str) -> None:
    """`chainlang run` stopped by SIGTERM or SIGINT ends the run, which writes the lines the
    plain view still holds (here it would hold them for an hour)."""
    import os
    import signal

    tools = REPO / "tests" / "run" / "run_tools.py"
    (tmp_path / "main.chain.yaml").write_text(
        "steps:\n  - test.echo: {value: 1}\n  - test.echo: {value: 2}\n  - test.pid_once: {name: wait.pid}\n",
        encoding="utf-8")
    code = (
        "import sys\n"
        "from chainlang.output.progress import PlainProgress\n"
        "PlainProgress.FLUSH_INTERVAL = PlainProgress.WATCH_INTERVAL = 3600.0\n"
        "from chainlang.cli import main\n"
        f"sys.argv = ['chainlang', 'run', 'main.chain.yaml', '--tools', {str(tools)!r}, '--transcript', 'run.jsonl']\n"
        "main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TERM")}
    env.update(NO_COLOR="1", PYTHONIOENCODING="utf-8", PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
    try:
        marker = tmp_path / ".chainlang" / "state" / "wait.pid"
        deadline = time.monotonic() + 60
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), proc.communicate(timeout=60)
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, out + err
    lines = err.splitlines()
    assert "✓ 1 test.echo" in " ".join(lines) and "✓ 2 test.echo" in " ".join(lines), err
    assert any(line.startswith("run interrupted") for line in lines), err


# -- rich -------------------------------------------------------------------------------


def rich_view(width: int = 100, **kwargs: Any) -> tuple[RichProgress, io.StringIO]:
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=width, color_system="truecolor", legacy_windows=False)
    return RichProgress(console=console, **kwargs), out


def test_rich_renders_a_run() -> None:
    view, out = rich_view(refresh_per_second=50)
    for rec in sample_run():
        view.record(rec)
    view.close()
    text = ANSI.sub("", out.getvalue()).replace("\r", "")
    lines = [line for line in text.splitlines() if line.strip()]
    # the scrolling lines are those of the plain view, without the progress messages
    expected = [line for line in SAMPLE_PLAIN.splitlines() if not line.startswith("…")]
    assert [line for line in lines if line in expected] == expected
    assert "\x1b[?25h" in out.getvalue()  # the cursor is shown again


def test_rich_live_table_of_running_steps() -> None:
    view, out = rich_view(refresh_per_second=50)
    r = Seq()
    view.record(r("run_started", chain="fan", file="fan.yaml", inputs={}, now=None, resumed=False))
    for i in range(10):
        view.record(r("step_started", step=f"2[{i}]", event="web.fetch", attempt=1, params={}))
        view.record(r("step_progress", step=f"2[{i}]", event="web.fetch", message=f"part {i} {HOSTILE}", fraction=i / 10 if i % 2 else None))
    view.record(r("step_started", step="2[3]", event="web.fetch", attempt=2, params={}))
    deadline = time.monotonic() + 5
    while "+4 more" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)
    view.record(r("step_finished", step="2[0]", event="web.fetch", status="failed", result=None, error={"type": "E", "message": HOSTILE}, duration_ms=2, attempt=1))
    view.record(r("run_finished", status="failed", outputs=None, error={"type": "E", "message": "boom"}, duration_ms=2))
    view.close()
    raw = out.getvalue()
    text = ANSI.sub("", raw)
    assert "+4 more" in text
    assert "part 1 evil\\x1b[2J" in text and "10%" in text
    assert "web.fetch (attempt 2)" in text
    assert "10 running" in text
    assert "✗ 2[0] web.fetch failed: evil\\x1b[2J" in text
    assert text.rstrip().splitlines()[-1].startswith("run failed: boom") or "run failed: boom" in text
    assert "\x1b]0;" not in raw and "\u202e" not in raw and "\x07" not in raw


def test_rich_bounds_the_lines_between_redraws() -> None:
    view, out = rich_view(refresh_per_second=0.2)  # no redraw during the burst
    records = big_run(20_000)
    failures = Seq()
    start = time.perf_counter()
    for n, rec in enumerate(records[:-1]):
        view.record(rec)
        if n % 1000 == 0:
            view.record(failures("step_finished", step="x", event="e", status="failed", result=None, error={"type": "E", "message": "m"}, duration_ms=1, attempt=1))
        assert len(view._pending) <= 2 * RichProgress.MAX_PENDING + 2
    view.record(records[-1])
    per_record = (time.perf_counter() - start) / len(records)
    view.close()
    text = ANSI.sub("", out.getvalue())
    elided = re.search(r"… ([\d,]+) more lines not shown \(([\d,]+) ok\); the transcript has them all", text)
    assert elided and elided[1] == elided[2]  # only ok lines were left out: every failure was kept
    assert text.count("✓ ") + int(elided[1].replace(",", "")) == 20_000
    assert text.count("✗ x e failed: m") == 61
    assert text.rstrip().splitlines()[-1].strip() == "run ok in 500.0 ms"
    assert per_record < 50e-6, f"{per_record * 1e6:.1f} µs per record"


def test_rich_ascii_console() -> None:
    from rich.console import Console

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")
    console = Console(file=stream, force_terminal=True, width=80, color_system=None)
    view = RichProgress(console=console, refresh_per_second=50)
    for rec in sample_run() + hostile_run():
        view.record(rec)
    time.sleep(0.05)
    view.close()
    stream.flush()
    text = raw.getvalue().decode("ascii")
    assert "+ 1 tools.now 0.4 ms" in text and "x 2 web.fetch failed" in text


def test_rich_close_is_idempotent_and_late_records_are_ignored() -> None:
    view, out = rich_view()
    view.close()
    view.close()
    view.record(sample_run()[0])
    assert "run greet" not in out.getvalue()


def test_notes_are_shown_in_order_with_the_steps_even_when_quiet() -> None:
    for mode in ("plain", "quiet"):
        stream = io.StringIO()
        view = make_progress(stream, mode, color=False)  # type: ignore[arg-type]
        view.record(StepFinished("1", "a.b", "ok", None, None, 1.0, 1))
        view.note("[info] hello\u202e\nworld")
        view.close()
        lines = stream.getvalue().splitlines()
        assert lines[-1] == "[info] hello\\u202e world"
        assert len(lines) == (2 if mode == "plain" else 1)


# -- typed records and secrets ------------------------------------------------------------

SECRET = "sk-live-0123456789abcdef"


@pytest.mark.parametrize("mode", ["plain", "plain-color", "plain-tty", "rich"])
def test_every_text_of_an_unmasked_record_is_masked(mode: str) -> None:
    """The views get the interpreter's typed records, not the writer's masked copies: every text
    they show is masked with the run's redactor, on every kind of line and the fast ok path."""
    r = Seq()
    s = SECRET
    records = [
        r("run_started", chain=f"c{s}", file=f"f{s}.yaml", inputs={"k": s}, now=f"n{s}", resumed=False),
        r("step_started", step=f"1{s}", event=f"e{s}", attempt=1, params={"p": s}),
        r("step_progress", step=f"1{s}", event=f"e{s}", message=f"m{s}", fraction=0.5),
        r("step_started", step=f"1{s}", event=f"e{s}", attempt=2, params={"p": s}, max_attempts=3),
        r("decide", step=f"2{s}", event=f"e{s}", asked={"q": s}, action=f"a{s}", reason=f"r{s}", source="x"),
        r("step_finished", step=f"1{s}", event=f"e{s}", status="ok", result=s, error=None, duration_ms=1.0, attempt=2),
        r("step_finished", step=f"3{s}", event=f"e{s}", status="failed", result=None,
          error={"type": f"T{s}", "message": f"boom {s}"}, duration_ms=1.0, attempt=1),
        r("step_finished", step=f"4{s}", event=f"e{s}", status="failed", result=None, error={"type": f"T{s}"},
          duration_ms=1.0, attempt=1),
        r("step_finished", step=f"5{s}", event=f"e{s}", status="skipped", result=None, error=None, duration_ms=0.0,
          attempt=1, reason=f"because {s}"),
        r("run_finished", status="failed", outputs={"o": s}, error={"type": "E", "message": f"run {s}"}, duration_ms=2.0),
    ]
    if mode == "rich":
        view, out = rich_view(refresh_per_second=50)
    else:
        out = CountingStream(tty=mode == "plain-tty")
        view = PlainProgress(out, color=mode == "plain-color")
    view.use_secrets(Redactor([SECRET]))
    for rec in records:
        view.record(rec)
    view.note(f"note {s}")
    view.close()
    text = ANSI.sub("", out.getvalue())
    assert "***" in text and SECRET[:6] not in text, text
    shown = ["e***", "a***", "r***", "boom ***", "T***", "because ***", "run ***", "note ***"]
    if mode != "rich":  # the rich view shows progress messages in its table only
        shown.append("m***")
    for part in shown:
        assert part in text, (part, text)


def test_a_secret_learnt_during_the_run_is_masked_in_later_ok_lines() -> None:
    """The ok lines' cache of event names does not keep a name cleaned before its secret was known."""
    from chainlang.output.progress.format import _Formatter

    redactor = Redactor()
    fmt = _Formatter("utf-8")
    fmt.secrets = redactor
    assert fmt.ok_line("1", f"e.{SECRET}", 1.0) == f"✓ 1 e.{SECRET} 1.0 ms"  # cached, no secret known yet
    redactor.add(SECRET)
    assert fmt.ok_line("2", f"e.{SECRET}", 1.0) == "✓ 2 e.*** 1.0 ms"


def test_the_runner_hands_the_views_typed_records(tmp_path: Path) -> None:
    from chainlang.engine import entry  # the CLI's entry points take a progress view (the public API does not)

    class Collect:
        def __init__(self) -> None:
            self.records: list[object] = []
            self.notes: list[str] = []

        def record(self, rec: Record) -> None:
            self.records.append(rec)

        def note(self, text: str) -> None:
            self.notes.append(text)

        def close(self) -> None:
            pass

    chain = tmp_path / "t.chain.yaml"
    chain.write_text("steps:\n  - test.echo: {value: 1}\n", encoding="utf-8")
    view = Collect()
    result = entry.run(chain, {}, tools=[str(REPO / "tests" / "run" / "run_tools.py")], transcript=tmp_path / "run.jsonl",
                       progress=view)
    assert result.status == "ok"
    kinds = [type(rec) for rec in view.records]
    assert kinds[0] is RunStarted and kinds[-1] is RunFinished and StepFinished in kinds, kinds
    assert all(type(rec) in CLASSES.values() for rec in view.records)
