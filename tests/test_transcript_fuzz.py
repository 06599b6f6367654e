"""Crafted transcripts (issue 21): whatever a transcript holds, `chainlang report` ends with
the report (exit 0) or a clear error naming the file and what is wrong (exit 1), never
"internal error" or a traceback; serve's `GET /runs/ID` and `GET /runs/ID/report` answer
200 or 4xx, never 500.

Real transcripts (made through the CLI: a run with a parallel group, a retry, a decide and
a hook; a run that fails with a branch cancelled) are mutated 420 ways with a fixed seed:
members of the wrong type, members dropped, times that are not ISO 8601, huge numbers,
NaN, deep nesting, cut lines, duplicate and reordered seqs, bad seals, bytes that are not
UTF-8, and more. Every mutant goes through the report command (in this process, through
the CLI's entry point: the code path of `chainlang report` and of serve's report page) and
the function behind `GET /runs/ID`; a sample of them goes through a real serve and a real
`chainlang report` process.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
from click.testing import CliRunner

from tests.helpers import cli, show
from tests.hooks_util import assert_clean
from tests.report_util import demo_project, run_demo
from tests.serve_util import Servers

SEED = 21
COUNT = 420
SERVED = 40  # mutants also read through a real serve
SPAWNED = 8  # and through a `chainlang report` process

FAILING = "steps:\n  - [test.fail: {message: the supplier is down}, test.sleep: {seconds: 30}]\n"

# values of the wrong type (or of the right type, but strange) for any member
STRANGE: list[Any] = [
    {"a": 1}, [], [1, "x"], None, True, False, 0, -1, 1.5, "", "x", "\u202e\u0000", "<script>alert(1)</script>",
    {"message": 5}, {"message": {"deep": [1]}}, {"type": None}, "2026-11-20T09:00:00+00:00", 10**30, -(10**18),
]
BAD_TS = ["yesterday", "", "2026-13-45T99:00:00Z", "2026-11-20T09:00:00", "2026-11-20", "Z", "0", "9999-12-31T23:59:59-23:59",
          "0001-01-01T00:00:00+23:59", "2026-11-20T09:00:00+25:00", "\u0662\u0660\u0662\u0666-11-20T09:00:00Z",
          "2026-11-20T09:00:00.123456789Z", "-2026-11-20T09:00:00Z"]
# JSON text put in place of a member's value, as written (not made by Python's encoder)
RAW = ["1" + "0" * 400, "-1" + "0" * 400, "1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1" + "0" * 5000,
       "9223372036854775808", "1e-400", "0.0", "-0", "1E+308"]


def _nested(depth: int, kind: str) -> str:
    return ("[" * depth + "]" * depth) if kind == "list" else ('{"a":' * depth + "1" + "}" * depth)


class Mutator:
    """Mutations of a transcript's lines (each a sealed JSON line, without its newline)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ops: list[Callable[[list[bytes]], list[bytes]]] = [
            self.retype, self.retype, self.drop_key, self.bad_ts, self.raw_number, self.raw_number, self.deep,
            self.truncate, self.duplicate, self.reorder, self.drop_line, self.bad_seal, self.non_utf8,
            self.swap_type, self.other_run, self.garbage_line, self.strange_strings, self.error_shape,
            self.status, self.seq, self.big_value, self.other_file,
        ]

    # -- helpers

    def pick(self, lines: list[bytes]) -> int:
        return self.rng.randrange(len(lines)) if lines else 0

    def record(self, line: bytes) -> dict[str, Any] | None:
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None

    def rewrite(self, lines: list[bytes], change: Callable[[dict[str, Any]], None],
                having: tuple[str, ...] = ()) -> list[bytes]:
        """Change one record (re-encoded: its seal no longer matches), most often one that has
        a member of `having` (the ones the change is about)."""
        if not lines:
            return lines
        fitting = [i for i, line in enumerate(lines) if any(b'"' + k.encode() + b'":' in line for k in having)]
        i = self.rng.choice(fitting) if fitting and self.rng.random() < 0.85 else self.pick(lines)
        rec = self.record(lines[i])
        if rec is None:
            return lines
        change(rec)
        lines[i] = json.dumps(rec, ensure_ascii=self.rng.random() < 0.5).encode("utf-8", "surrogatepass")
        return lines

    def key_of(self, rec: dict[str, Any]) -> str:
        return self.rng.choice(sorted(rec)) if rec else "type"

    # -- the mutations

    def retype(self, lines: list[bytes]) -> list[bytes]:
        def change(rec: dict[str, Any]) -> None:
            rec[self.key_of(rec)] = self.rng.choice(STRANGE)
        return self.rewrite(lines, change, ("error", "step", "params", "result", "hook", "emit"))

    def drop_key(self, lines: list[bytes]) -> list[bytes]:
        def change(rec: dict[str, Any]) -> None:
            rec.pop(self.key_of(rec), None)
        return self.rewrite(lines, change)

    def bad_ts(self, lines: list[bytes]) -> list[bytes]:
        def change(rec: dict[str, Any]) -> None:
            rec["ts"] = self.rng.choice(BAD_TS)
        return self.rewrite(lines, change)

    def raw_number(self, lines: list[bytes]) -> list[bytes]:
        """A numeric member (or any) written as a number no float holds, NaN, Infinity..."""
        def change(rec: dict[str, Any]) -> None:
            numeric = [k for k in ("seq", "attempt", "max_attempts", "duration_ms", "fraction") if k in rec]
            rec[self.rng.choice(numeric) if numeric and self.rng.random() < 0.8 else self.key_of(rec)] = "@RAW@"
        lines = self.rewrite(lines, change, ("duration_ms", "attempt", "fraction"))
        raw = self.rng.choice(RAW).encode()
        return [line.replace(b'"@RAW@"', raw) for line in lines]

    def deep(self, lines: list[bytes]) -> list[bytes]:
        def change(rec: dict[str, Any]) -> None:
            keys = [k for k in ("params", "result", "inputs", "outputs", "error", "emit", "asked", "request") if k in rec]
            rec[self.rng.choice(keys) if keys and self.rng.random() < 0.8 else self.key_of(rec)] = "@DEEP@"
        lines = self.rewrite(lines, change, ("params", "result", "inputs", "outputs", "error"))
        nested = _nested(self.rng.choice([40, 200, 900, 3000, 100_000]), self.rng.choice(["list", "map"])).encode()
        return [line.replace(b'"@DEEP@"', nested) for line in lines]

    def truncate(self, lines: list[bytes]) -> list[bytes]:
        i = self.pick(lines)
        if lines and lines[i]:
            lines[i] = lines[i][: self.rng.randrange(len(lines[i]))]
        if self.rng.random() < 0.5 and lines:  # the cut line last: a torn tail, or not
            lines.append(lines.pop(i))
        return lines

    def duplicate(self, lines: list[bytes]) -> list[bytes]:
        i = self.pick(lines)
        if lines:
            lines.insert(self.rng.randrange(len(lines) + 1), lines[i])
        return lines

    def reorder(self, lines: list[bytes]) -> list[bytes]:
        if len(lines) > 1:
            i, j = self.rng.sample(range(len(lines)), 2)
            lines[i], lines[j] = lines[j], lines[i]
        return lines

    def drop_line(self, lines: list[bytes]) -> list[bytes]:
        if lines:
            del lines[self.pick(lines)]
        return lines

    def bad_seal(self, lines: list[bytes]) -> list[bytes]:
        i = self.pick(lines)
        if not lines:
            return lines
        line = lines[i]
        choice = self.rng.randrange(4)
        if choice == 0:
            lines[i] = re.sub(rb'"mac":"[0-9a-f]', b'"mac":"g', line)
        elif choice == 1:
            lines[i] = re.sub(rb',"mac":"[0-9a-f]*"', b"", line)
        elif choice == 2:
            lines[i] = re.sub(rb'"mac":"[0-9a-f]*"', b'"mac":' + self.rng.choice([b"5", b"null", b'{"a":1}', b'"' + b"0" * 32 + b'"']), line)
        else:  # a member changed, its seal left as it was
            lines[i] = line.replace(b'"ok"', b'"failed"', 1) if b'"ok"' in line else line.replace(b":1,", b":2,", 1)
        return lines

    def non_utf8(self, lines: list[bytes]) -> list[bytes]:
        i = self.pick(lines)
        if lines:
            at = self.rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:at] + self.rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf"]) + lines[i][at:]
        return lines

    def swap_type(self, lines: list[bytes]) -> list[bytes]:
        kinds = ["run_started", "step_started", "step_finished", "step_progress", "decide", "hook_fired",
                 "hook_finished", "hook_dropped", "run_finished", "clock", "model_call", "bogus", "RUN_STARTED"]

        def change(rec: dict[str, Any]) -> None:
            rec["type"] = self.rng.choice(kinds)
        return self.rewrite(lines, change)

    def other_run(self, lines: list[bytes]) -> list[bytes]:
        def change(rec: dict[str, Any]) -> None:
            rec["run_id"] = self.rng.choice(["other", "", 5, None, "../../etc/passwd"])
        return self.rewrite(lines, change)

    def garbage_line(self, lines: list[bytes]) -> list[bytes]:
        garbage = self.rng.choice([b"", b"   ", b"[]", b"null", b"{}", b"\x00\x00", b"{", b'"x"', b"1e999", b"NaN",
                                   b'{"type":"clock"}', b"\r", b"\xef\xbb\xbf{}"])
        lines.insert(self.rng.randrange(len(lines) + 1), garbage)
        return lines

    def strange_strings(self, lines: list[bytes]) -> list[bytes]:
        texts = ["", "hook:", "hook:x/hook:", "/" * 3000, "\u202e", "a\u0000b", "<b>x</b>", "../../../etc/passwd",
                 "x" * 70_000, "\ud800", "4/hook:audit/1", "[0]"]

        def change(rec: dict[str, Any]) -> None:
            key = self.rng.choice([k for k in ("step", "event", "hook", "file", "chain", "thread", "when", "message",
                                               "reason", "started_at", "now", "value") if k in rec] or ["step"])
            rec[key] = self.rng.choice(texts)
        return self.rewrite(lines, change, ("step", "file", "hook"))

    def error_shape(self, lines: list[bytes]) -> list[bytes]:
        def change(rec: dict[str, Any]) -> None:
            keys = [k for k in ("error", "emit", "inputs", "outputs", "usage", "request", "asked") if k in rec]
            key = self.rng.choice(keys or ["error"])
            rec[key] = self.rng.choice([{"message": 5}, {"message": None}, {"message": ["a"]}, {"message": {"a": 1}},
                                        {}, {"event": {"a": 1}}, {"event": "task.due", "task": [1]}, {"fired": "x"},
                                        {"fired": [1, None]}, {"message": "x" * 500}])
        return self.rewrite(lines, change, ("error", "emit", "outputs"))

    def status(self, lines: list[bytes]) -> list[bytes]:
        def change(rec: dict[str, Any]) -> None:
            rec["status"] = self.rng.choice(["ok", "failed", "skipped", "cancelled", "broken", "limit", "interrupted",
                                             "running", "weird", ""])
        return self.rewrite(lines, change, ("status",))

    def seq(self, lines: list[bytes]) -> list[bytes]:
        def change(rec: dict[str, Any]) -> None:
            rec["seq"] = self.rng.choice([0, -1, 1, 2, 10**12, 10**20, 1.0, "1"])
        return self.rewrite(lines, change)

    def big_value(self, lines: list[bytes]) -> list[bytes]:
        def change(rec: dict[str, Any]) -> None:
            rec[self.rng.choice(["params", "result", "inputs"])] = {"text": "x" * self.rng.choice([10_000, 300_000])}
        return self.rewrite(lines, change)

    def other_file(self, lines: list[bytes]) -> list[bytes]:
        """The run's file another file of the project (its tools, its key, a transcript, itself)."""
        def change(rec: dict[str, Any]) -> None:
            if isinstance(rec.get("file"), str):
                name = self.rng.choice(["tools.py", "chainlang.toml", ".chainlang/transcript.key", "review.jsonl",
                                        ".", "..", "missing.chain.yaml", ".chainlang/runs", "/dev/zero", "/"])
                rec["file"] = str(Path(rec["file"]).parent / name) if not name.startswith("/") else name
                if self.rng.random() < 0.5:  # and its digest, so the graph would be shown
                    rec.pop("emit", None)
        return self.rewrite(lines, change, ("file",))

    def mutate(self, data: bytes) -> bytes:
        lines = data.split(b"\n")
        ending = lines.pop() if lines and lines[-1] == b"" else None
        for _ in range(self.rng.choice([1, 1, 1, 2, 3])):
            lines = self.rng.choice(self.ops)(lines)
        out = b"\n".join(lines)
        if ending is not None and self.rng.random() < 0.9:
            out += b"\n"
        if self.rng.random() < 0.03:
            out = out.replace(b"\n", b"\r\n")
        return out


# the two crafted records of the issue, then the empty file and a few fixed shapes, then random mutants
def _fixed(source: bytes) -> list[bytes]:
    lines = source.split(b"\n")
    second = json.loads(lines[1])
    typed = dict(second, type={"a": 1})
    timed = dict(second, ts="yesterday")
    lone = dict(json.loads(lines[0]), inputs={"n": "\ud800"})  # as a writer keeps it: \u-escaped
    return [
        b"\n".join([lines[0], json.dumps(typed).encode()] + lines[2:]),
        b"\n".join([lines[0], json.dumps(timed).encode()] + lines[2:]),
        b"\n".join([json.dumps(lone).encode()] + lines[1:]),
        b"", b"\n", b"\xef\xbb\xbf" + source, source.replace(b"\n", b"\r\n"),
    ]


def mutants(sources: list[bytes], count: int = COUNT, seed: int = SEED) -> list[bytes]:
    rng = random.Random(seed)
    mutator = Mutator(rng)
    out = _fixed(sources[0])
    while len(out) < count:
        out.append(mutator.mutate(rng.choice(sources)))
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """The demo project with its two real runs: the demo's and a failed one."""
    project = demo_project(tmp_path_factory.mktemp("fuzz") / "p")
    demo = run_demo(project)
    (project / "cut.chain.yaml").write_text(FAILING, encoding="utf-8")
    failed = cli(project, "run", "cut.chain.yaml", "--transcript", "cut.jsonl")
    assert failed.returncode == 1, show(failed)
    return project, [demo, project / "cut.jsonl"]


def _write(project: Path, number: int, data: bytes) -> tuple[str, Path]:
    runs = project / ".chainlang" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_id = f"fuzz-{number:04d}"
    path = runs / f"{run_id}.jsonl"
    path.write_bytes(data)
    return run_id, path


def _check_report(runner: CliRunner, path: Path, data: bytes) -> None:
    """`chainlang report PATH -o FILE` in this process (the page written as the command writes it)."""
    from chainlang.cli.main import main

    page = path.with_suffix(".html")
    outcome = runner.invoke(main, ["report", str(path), "-o", str(page)], catch_exceptions=True)
    said = outcome.stderr
    where = f"mutant {path.name} ({len(data)} bytes, starting {data[:300]!r}):\n{said[-2000:]}"
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit), \
        f"{where}\n{outcome.exception!r}"
    assert outcome.exit_code in (0, 1), where
    assert "internal error" not in said and "Traceback" not in said, where
    if outcome.exit_code == 1:
        assert said.startswith("chainlang: error: not a transcript chainlang can read: ") and str(path) in said, where
    else:
        assert outcome.stdout.strip() == str(page), where
        assert page.read_text(encoding="utf-8").lower().startswith("<!doctype html>"), where
        page.unlink()


@pytest.mark.slow
def test_crafted_transcripts_get_a_clear_error_from_report_and_the_run_page(
        made: tuple[Path, list[Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """420 mutants through the report command (in this process) and `GET /runs/ID`'s function."""
    from chainlang.report.status import run_info

    project, sources = made
    monkeypatch.chdir(project)
    runner = CliRunner()
    outcomes = {"report": 0, "refused": 0}
    for number, data in enumerate(mutants([s.read_bytes() for s in sources])):
        run_id, path = _write(project, number, data)
        _check_report(runner, path, data)
        info = run_info(path.parent, run_id)
        assert info is not None and info["run_id"] == run_id
        if info["status"] == "unreadable":
            assert str(path) in info["error"], info
            outcomes["refused"] += 1
        else:
            assert info["status"] in ("ok", "failed", "broken", "limit", "interrupted", "running"), info
            outcomes["report"] += 1
        json.dumps(info, allow_nan=False, ensure_ascii=False).encode("utf-8")  # what serve sends: JSON in UTF-8
        path.unlink()
    # the mutants are not all refused, nor all harmless: both paths were taken many times
    assert outcomes["report"] > 40 and outcomes["refused"] > 200, outcomes


def test_the_two_crafted_records_of_the_issue_name_their_line(made: tuple[Path, list[Path]]) -> None:
    project, sources = made
    typed, timed = _fixed(sources[0].read_bytes())[:2]
    for name, data, what in (("typed.jsonl", typed, "the record's type must be a string"),
                             ("timed.jsonl", timed, "ts 'yesterday' is not an ISO 8601 time")):
        (project / name).write_bytes(data)
        made_ = cli(project, "report", name, "-o", "-")
        assert made_.returncode == 1, show(made_)
        assert f"{name}:2: step_started record: {what}" in made_.stderr or f"{name}:2: {what}" in made_.stderr, \
            show(made_)
        assert_clean(made_)
        assert "internal error" not in made_.stderr


@pytest.mark.slow
def test_crafted_transcripts_through_a_real_serve_and_report_process(made: tuple[Path, list[Path]],
                                                                     tmp_path: Path) -> None:
    """A sample of the mutants: serve's two run pages answer 200 or 4xx (never 500), and
    `chainlang report` as a process exits 0 or 1 without a traceback."""
    source, sources = made
    project = tmp_path / "served"
    shutil.copytree(source, project, ignore=shutil.ignore_patterns("runs"))
    all_mutants = mutants([s.read_bytes() for s in sources])
    sample = random.Random(SEED + 1).sample(range(len(all_mutants)), SERVED)
    ids = [_write(project, number, all_mutants[number])[0] for number in sample]
    with Servers() as started:
        server = started.start(project)
        for run_id in ids:
            for page in (f"/runs/{run_id}", f"/runs/{run_id}/report"):
                answer = server.get(page)
                assert answer.status_code in (200, 422), f"{page}: {answer.status_code} {answer.text[:500]}"
                assert "internal error" not in answer.text, f"{page}: {answer.text[:500]}"
                if answer.status_code == 422:
                    assert f"{run_id}.jsonl:" in answer.json()["error"] or f"{run_id}.jsonl" in answer.json()["error"]
        assert "Traceback" not in server.stderr and "internal error" not in server.stderr, server.describe()
    for run_id in ids[:SPAWNED]:
        made_ = cli(project, "report", f".chainlang/runs/{run_id}.jsonl", "-o", "-")
        assert made_.returncode in (0, 1), show(made_)
        assert_clean(made_)
        assert "internal error" not in made_.stderr, show(made_)


@pytest.mark.parametrize(("change", "message"), [
    ({"type": {"a": 1}}, ":2: the record's type must be a string (one of clock, decide"),
    ({"type": None}, ":2: the record's type must be a string"),
    ({"ts": "yesterday"}, ":2: step_started record: ts 'yesterday' is not an ISO 8601 time with its offset"),
    ({"ts": "2026-11-20T09:00:00"}, ":2: step_started record: ts '2026-11-20T09:00:00' is not an ISO 8601 time"),
    ({"seq": 0}, ":2: step_started record: seq 0 (seq counts from 1)"),
    ({"attempt": "1"}, ":2: step_started record: 'attempt' must be an integer, not a string"),
    ({"max_attempts": "@RAW@1" + "0" * 400}, ":2: step_started record: 'max_attempts' is a number too large"),
    ({"params": "@RAW@NaN"}, ":2: not a JSON line (NaN is not a JSON value"),
    ({"params": "@RAW@1e999"}, ":2: not a JSON line (the number 1e999 is too large"),
    ({"params": "@RAW@" + "[" * 5000 + "]" * 5000}, ":2: the record nests too deeply to be read"),
])
def test_the_reader_names_the_line_and_what_is_wrong(made: tuple[Path, list[Path]], tmp_path: Path,
                                                     change: dict[str, Any], message: str) -> None:
    """Each rule of the reader, on the second record (a step_started) of a real transcript."""
    from chainlang.journal.reader import TranscriptError, read_transcript

    lines = made[1][0].read_bytes().split(b"\n")
    record = dict(json.loads(lines[1]), **{k: ("@RAW@" if str(v).startswith("@RAW@") else v)
                                           for k, v in change.items()})
    line = json.dumps(record)
    for value in change.values():
        if str(value).startswith("@RAW@"):
            line = line.replace('"@RAW@"', str(value).removeprefix("@RAW@"), 1)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join([lines[0], line.encode()] + lines[2:]))
    with pytest.raises(TranscriptError) as refused:
        read_transcript(path)
    assert f"{path}{message}" in str(refused.value)


def test_an_error_whose_message_is_not_text_is_refused(made: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """The failed run's step_finished with `error.message` a number: refused, not a crash of the page."""
    from chainlang.journal.reader import TranscriptError, read_transcript

    lines = made[1][1].read_text(encoding="utf-8").splitlines()
    number = next(i for i, line in enumerate(lines) if '"type":"step_finished"' in line and '"error":{' in line)
    record = json.loads(lines[number])
    record["error"] = {"message": 5}
    lines[number] = json.dumps(record)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(TranscriptError, match=rf":{number + 1}: step_finished record: the error's 'message' must be "
                                              "a string, not a number"):
        read_transcript(path)
    made_ = cli(made[0], "report", str(path), "-o", "-")
    assert made_.returncode == 1 and "must be a string, not a number" in made_.stderr, show(made_)
