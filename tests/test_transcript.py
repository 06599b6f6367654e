"""The durable transcript (LANGUAGE.md §9): writer, reader, redaction, idempotency keys."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from chainlang.journal.jsonl import (
    RECORD_TYPES,
    Transcript,
    TranscriptError,
    TranscriptWriter,
    idempotency_key,
    read_transcript,
)

REPO = Path(__file__).resolve().parent.parent
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SECRET = "sk-live-0123456789abcdef"


def lines(path: Path) -> list[dict[str, Any]]:
    """The records as written, without their seals (`mac`)."""
    out = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for rec in out:
        assert re.fullmatch(r"[0-9a-f]{32}", rec.pop("mac")), rec
    return out


def write_run(path: Path, run_id: str = "run-1", **kwargs: Any) -> None:
    """A small run: two steps (one retried), a decide, a hook, a clock reading, a finish."""
    with TranscriptWriter(path, run_id, **kwargs) as w:
        w.write("run_started", chain="chains/deploy.yaml", inputs={"env": "prod"}, options={"now": "2025-01-02T03:04:05Z"})
        w.write("clock", value="2025-01-02T03:04:05Z")
        w.write("step_started", step="1", event="tools.http.get", attempt=1)
        w.write("step_progress", step="1", event="tools.http.get", message="half", fraction=0.5)
        w.write("step_finished", step="1", event="tools.http.get", status="failed", error="boom", duration_ms=3)
        w.write("step_started", step="1", event="tools.http.get", attempt=2)
        w.write("step_finished", step="1", event="tools.http.get", status="ok", result={"code": 200}, duration_ms=4)
        w.write("decide", step="3.1", answer="retry", model="fake")
        w.write("decide", step="3.1", answer="accept", model="fake")
        w.write("hook_fired", hook="notify", when="post", event="tools.http.get")
        w.write("step_started", step="3.1", event="agent.ask", attempt=1)
        w.write("clock", value="2025-01-02T03:04:06Z")
        w.write("run_finished", status="ok", outputs={"answer": "é✓"})


# --------------------------------------------------------------------------- round trip


def test_round_trip_of_every_type(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "run.jsonl"  # parent dirs are created
    write_run(path)
    raw = path.read_text(encoding="utf-8")
    assert raw.endswith("\n") and ", " not in raw and '": ' not in raw  # compact
    assert "é✓" in raw  # ensure_ascii=False
    recs = lines(path)
    assert {r["type"] for r in recs} == RECORD_TYPES
    assert [r["seq"] for r in recs] == list(range(1, len(recs) + 1))
    for r in recs:
        assert list(r)[:4] == ["type", "run_id", "seq", "ts"]
        assert r["run_id"] == "run-1"
        assert TS.match(r["ts"]), r["ts"]

    t = read_transcript(path)
    assert isinstance(t, Transcript)
    assert t.run_id == "run-1" and t.last_seq == len(recs) and not t.torn_tail
    assert t.started["chain"] == "chains/deploy.yaml"
    assert t.started["inputs"] == {"env": "prod"}
    assert t.started["options"] == {"now": "2025-01-02T03:04:05Z"}
    assert t.finished is not None and t.finished["outputs"] == {"answer": "é✓"}
    assert t.records == recs
    assert list(t.steps) == ["1", "3.1"]
    one = t.steps["1"]
    assert one.attempts == 2 and one.started["attempt"] == 2
    assert one.finished is not None and one.finished["status"] == "ok" and one.done
    assert [s.step for s in t.unfinished()] == ["3.1"]
    assert t.steps["3.1"].finished is None and t.steps["3.1"].attempts == 1
    assert t.clock_readings == ["2025-01-02T03:04:05Z", "2025-01-02T03:04:06Z"]
    assert [d["answer"] for d in t.decisions["3.1"]] == ["retry", "accept"]
    assert t.restarts == []


def test_write_returns_the_record_as_written(tmp_path: Path) -> None:
    with TranscriptWriter(tmp_path / "t.jsonl", "r") as w:
        rec = w.write("run_started", chain="c.yaml")
        assert w.last_seq == 1
    assert rec == lines(tmp_path / "t.jsonl")[0]
    assert w.closed


def test_retry_resets_the_finished_record(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started")
        w.write("step_started", step="2", event="e")
        w.write("step_finished", step="2", event="e", status="failed")
        w.write("step_started", step="2", event="e")
    t = read_transcript(path)
    assert t.steps["2"].attempts == 2 and t.steps["2"].finished is None
    assert t.unfinished() == [t.steps["2"]]
    assert t.finished is None


def test_a_later_run_started_reopens_the_run(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", n=1)
        w.write("run_finished", status="stopped")
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", n=2, resumed=True)
    t = read_transcript(path)
    assert t.started["n"] == 1 and [r["n"] for r in t.restarts] == [2]
    assert t.finished is None


# --------------------------------------------------------------------------- resume


def test_seq_continues_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        assert not w.resumed and w.last_seq == 0
        w.write("run_started")
        w.write("step_started", step="1", event="e")
    with TranscriptWriter(path, "r") as w:
        assert w.resumed and w.last_seq == 2
        assert w.write("step_finished", step="1", event="e", status="ok")["seq"] == 3
    assert [r["seq"] for r in lines(path)] == [1, 2, 3]
    assert read_transcript(path).steps["1"].done


def test_reopen_with_another_run_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r1") as w:
        w.write("run_started")
    before = path.read_bytes()
    with pytest.raises(ValueError, match="r1"):
        TranscriptWriter(path, "r2")
    assert path.read_bytes() == before


def test_reopen_of_a_corrupt_transcript_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"nope": 1}\n{"also": 2}\n')
    with pytest.raises(TranscriptError, match=":1:"):
        TranscriptWriter(path, "r")


# --------------------------------------------------------------------------- torn tail


def test_torn_last_line_is_tolerated_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    n = len(lines(path))
    with path.open("ab") as f:
        f.write(b'{"type":"step_started","run_id":"run-1","seq":99,"ts":"2025-')
    t = read_transcript(path)
    assert t.torn_tail and t.last_seq == n and len(t.records) == n

    # the writer cuts the fragment off before appending, so no line glues onto it
    with TranscriptWriter(path, "run-1") as w:
        assert w.repaired_torn_tail and w.last_seq == n
        w.write("step_finished", step="3.1", event="agent.ask", status="ok")
    t = read_transcript(path)
    assert not t.torn_tail and t.last_seq == n + 1 and t.unfinished() == []


def test_torn_multibyte_tail_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    with path.open("ab") as f:
        f.write('{"type":"decide","x":"é'.encode()[:-1])  # cut inside a UTF-8 sequence
    assert read_transcript(path).torn_tail


def test_file_holding_only_a_fragment(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type":"run_sta')
    with pytest.raises(TranscriptError, match="no run_started"):
        read_transcript(path)
    with TranscriptWriter(path, "r") as w:  # nothing usable: start afresh
        assert w.repaired_torn_tail and not w.resumed
        assert w.write("run_started")["seq"] == 1
    assert read_transcript(path).last_seq == 1


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    n = len(lines(path))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    t = read_transcript(path)
    assert not t.torn_tail and t.last_seq == n and t.finished is not None
    with TranscriptWriter(path, "run-1") as w:
        assert not w.repaired_torn_tail
        w.write("run_started", resumed=True)
    assert [r["seq"] for r in lines(path)] == list(range(1, n + 2))


# --------------------------------------------------------------------------- corruption


def _corrupt(path: Path, number: int, text: str) -> None:
    all_lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    all_lines[number - 1] = text + "\n"
    path.write_text("".join(all_lines), encoding="utf-8")


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"type":"step_started","run_id":"run-1","seq":', "not a JSON line"),
        ("", "not a JSON line"),
        ("[1, 2]", "expected a JSON object"),
        ('{"type":"bogus","run_id":"run-1","seq":4,"ts":"x"}', "unknown record type"),
        ('{"type":"step_started","run_id":"run-1","seq":4,"ts":"x","event":"e"}', "'step'"),
        ('{"type":"clock","run_id":"run-1","seq":4,"ts":"x"}', "'value'"),
        ('{"type":"decide","run_id":"run-1","seq":4,"ts":"x"}', "'step'"),
        ('{"type":"hook_fired","run_id":"run-1","seq":"4","ts":"x"}', "integer seq"),
        ('{"type":"hook_fired","run_id":"other","seq":4,"ts":"x"}', "run 'other'"),
        ('{"type":"hook_fired","run_id":"run-1","seq":2,"ts":"x"}', "seq 2 does not follow seq 3"),
        ('{"type":"hook_fired","run_id":"run-1","seq":3,"ts":"x"}', "seq 3 does not follow seq 3"),
        ('{"type":"step_finished","run_id":"run-1","seq":4,"ts":"x","step":"9","event":"e"}', "never started"),
    ],
)
def test_corruption_in_the_middle_names_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    _corrupt(path, 4, text)
    with pytest.raises(TranscriptError) as info:
        read_transcript(path)
    assert f"{path}:4:" in str(info.value)
    assert message in str(info.value)


def test_corrupt_last_line_with_newline_is_not_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    with path.open("ab") as f:
        f.write(b"{garbage\n")
    with pytest.raises(TranscriptError, match=r":14: not a JSON line"):
        read_transcript(path)


def test_unterminated_but_invalid_record_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_run(path)
    with path.open("ab") as f:
        f.write(b'{"type":"bogus"}')  # parses: not a torn write, a bad record
    with pytest.raises(TranscriptError, match=r":14: unknown record type"):
        read_transcript(path)


def test_missing_run_started(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"type":"clock","run_id":"r","seq":1,"ts":"x","value":"v"}\n')
    with pytest.raises(TranscriptError, match=r":1: the first record is clock, not run_started"):
        read_transcript(path)
    path.write_text("")
    with pytest.raises(TranscriptError, match="no run_started"):
        read_transcript(path)


def test_step_finished_twice_in_one_attempt(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started")
        w.write("step_started", step="1", event="e")
        w.write("step_finished", step="1", event="e")
        w.write("step_finished", step="1", event="e")
    with pytest.raises(TranscriptError, match=r":4: step 1 finished twice"):
        read_transcript(path)


# --------------------------------------------------------------------------- secrets


def test_secrets_are_redacted_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=[SECRET, "hunter2!"]) as w:
        w.write("run_started", inputs={"token": SECRET})
        rec = w.write(
            "step_finished",
            step="1",
            event="tools.http.get",
            result={
                "headers": {"Authorization": f"Bearer {SECRET}", SECRET: "as a key", f"x-{SECRET}-y": 1},
                "list": [SECRET, ["deep", {"deeper": f"{SECRET}{SECRET}"}]],
                "other": "password is hunter2! ok",
                "clean": "nothing to see",
            },
            error=f"failed with {SECRET}",
        )
    raw = path.read_text(encoding="utf-8")
    assert SECRET not in raw and "hunter2!" not in raw
    first, second = lines(path)
    assert first["inputs"] == {"token": "***"}
    assert second == rec
    result = second["result"]
    assert result["headers"] == {"Authorization": "Bearer ***", "***": "as a key", "x-***-y": 1}
    assert result["list"] == ["***", ["deep", {"deeper": "***"}]]
    assert result["other"] == "password is *** ok"
    assert result["clean"] == "nothing to see"
    assert second["error"] == "failed with ***"


def test_overlapping_secrets_leave_no_fragment(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=["abcd", "abcdefgh", "ghij"]) as w:
        w.write("run_started", a="xabcdefghijx", b="abcdabcd", c="zzabcdzz")
    rec = lines(path)[0]
    assert (rec["a"], rec["b"], rec["c"]) == ("x***x", "***", "zz***zz")


def test_secret_with_json_special_characters(tmp_path: Path) -> None:
    secret = 'pa"ss\\word\n\u00e9'
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=[secret]) as w:
        w.write("run_started", value=f"<{secret}>")
    assert lines(path)[0]["value"] == "<***>"
    assert secret not in read_transcript(path).started["value"]


def test_numeric_secret_in_a_number(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=["4242424242"]) as w:
        w.write("run_started", card=4242424242, ok=7, flag=True)
    rec = lines(path)[0]
    assert rec["card"] == "***" and rec["ok"] == 7 and rec["flag"] is True


def test_keys_that_differ_only_in_secrets_are_both_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r", secrets=["s3cret-one", "s3cret-two"]) as w:
        w.write("run_started", m={"s3cret-one": 1, "s3cret-two": 2})
    assert lines(path)[0]["m"] == {"***": 1, "***#2": 2}


def test_add_secret_learned_during_the_run(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", token="later-learned-token")
        w.add_secret("later-learned-token")
        w.write("step_started", step="1", event="e", token="later-learned-token")
    first, second = lines(path)
    assert first["token"] == "later-learned-token"  # written before it was known
    assert second["token"] == "***"


@pytest.mark.parametrize("short", ["", "Zq", "Q7x"])
def test_short_secrets_are_refused_without_echoing_them(tmp_path: Path, short: str) -> None:
    with pytest.raises(ValueError, match="shorter than 4") as info:
        TranscriptWriter(tmp_path / "t.jsonl", "r", secrets=["long-enough", short])
    assert short == "" or short not in str(info.value)
    with TranscriptWriter(tmp_path / "u.jsonl", "r") as w:
        with pytest.raises(ValueError, match="shorter than 4"):
            w.add_secret(short)
        with pytest.raises(TypeError):
            w.add_secret(1234)  # type: ignore[arg-type]


def test_secret_in_a_bad_field_name_is_not_echoed(tmp_path: Path) -> None:
    with TranscriptWriter(tmp_path / "t.jsonl", "r", secrets=[SECRET]) as w:
        with pytest.raises(TypeError) as info:
            w.write("run_started", data={SECRET: object()})
    assert SECRET not in str(info.value) and "***" in str(info.value)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"result": object()}, "'result'"),
        ({"result": {"items": [1, {"when": {1, 2}}]}}, "'result.items[1].when'"),
        ({"result": {"a b": b"bytes"}}, "'result[\"a b\"]'"),
        ({"duration_ms": float("nan")}, "'duration_ms'"),
        ({"x": [float("inf")]}, "'x[0]'"),
        ({"result": {1: "int key"}}, "'result'"),
        ({"path": Path("a")}, "'path'"),
    ],
)
def test_non_json_values_are_rejected_naming_the_field(tmp_path: Path, fields: dict[str, Any], named: str) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started")
        with pytest.raises(TypeError, match="plain JSON") as info:
            w.write("step_finished", step="1", event="e", **fields)
        assert named in str(info.value)
        assert w.last_seq == 1
    assert len(lines(path)) == 1


def test_json_subclasses_and_tuples_are_accepted(tmp_path: Path) -> None:
    import enum

    class Color(str, enum.Enum):
        RED = "red"

    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", color=Color.RED, pair=(1, 2), big=10**30, f=1.5)
    rec = lines(path)[0]
    assert (rec["color"], rec["pair"], rec["big"], rec["f"]) == ("red", [1, 2], 10**30, 1.5)


def test_lone_surrogate_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started", odd="x\ud800y")
    assert read_transcript(path).started["odd"] == "x\ud800y"


def test_bad_types_and_fields(tmp_path: Path) -> None:
    with TranscriptWriter(tmp_path / "t.jsonl", "r") as w:
        with pytest.raises(ValueError, match="unknown transcript record type 'step_done'"):
            w.write("step_done", step="1", event="e")
        with pytest.raises(ValueError, match="'step'"):
            w.write("step_started", event="e")
        with pytest.raises(ValueError, match="'event'"):
            w.write("step_progress", step="1")
        with pytest.raises(ValueError, match="'event'"):
            w.write("step_finished", step="1", event="")
        with pytest.raises(ValueError, match="'value'"):
            w.write("clock", value=12)
        with pytest.raises(ValueError, match="'step'"):
            w.write("decide", answer="x")
        with pytest.raises(ValueError, match="seq"):
            w.write("run_started", seq=5)
        assert w.last_seq == 0
    with pytest.raises(ValueError, match="run_id"):
        TranscriptWriter(tmp_path / "u.jsonl", "")


def test_write_after_close(tmp_path: Path) -> None:
    w = TranscriptWriter(tmp_path / "t.jsonl", "r")
    w.close()
    w.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        w.write("run_started")


def test_failed_write_leaves_no_half_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    w = TranscriptWriter(path, "r")
    w.write("run_started")
    real_write = os.write
    calls = {"n": 0}

    def half_then_enospc(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_enospc)
    with pytest.raises(OSError):
        w.write("step_started", step="1", event="e", pad="x" * 100)
    monkeypatch.setattr(os, "write", real_write)
    assert w.write("step_started", step="1", event="e")["seq"] == 2
    w.close()
    t = read_transcript(path)
    assert not t.torn_tail and [r["seq"] for r in t.records] == [1, 2]


def test_durable_mode(tmp_path: Path) -> None:
    path = tmp_path / "d" / "t.jsonl"
    with TranscriptWriter(path, "r", durable=True) as w:
        w.write("run_started")
        w.write("run_finished", status="ok")
    assert read_transcript(path).finished is not None


def test_concurrent_writers_threads(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, "r") as w:
        w.write("run_started")

        def work(k: int) -> None:
            for i in range(50):
                w.write("step_progress", step=str(k), event="e", i=i)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert [r["seq"] for r in read_transcript(path).records] == list(range(1, 402))


# --------------------------------------------------------------------------- crash


def test_sigkill_loses_no_written_line(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    n = 200
    script = textwrap.dedent(
        """
        import os, signal, sys
        from chainlang.journal.jsonl import TranscriptWriter
        w = TranscriptWriter(sys.argv[1], "killed-run")
        w.write("run_started", chain="c.yaml")
        for i in range(int(sys.argv[2]) - 1):
            w.write("step_started", step=str(i), event="e", payload="x" * 64)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", script, str(path), str(n)], env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    t = read_transcript(path)
    assert len(t.records) == n and t.last_seq == n and not t.torn_tail
    assert len(t.unfinished()) == n - 1


# --------------------------------------------------------------------------- idempotency


def test_idempotency_keys() -> None:
    key = idempotency_key("run-1", "3.1", 1)
    assert re.fullmatch(r"[0-9a-f]{32}", key)
    assert idempotency_key("run-1", "3.1", 1) == key
    # pinned: the derivation is part of the contract with tools (keys survive upgrades)
    assert key == "8fa01d5a7acd1a56031afdddc2e30396" == _expected_key("run-1", "3.1", 1)
    keys = {
        idempotency_key(r, s, a)
        for r in ("run-1", "run-2")
        for s in ("1", "3", "3.1", "1.3", "31")
        for a in (1, 2, 3)
    }
    assert len(keys) == 2 * 5 * 3
    assert idempotency_key("a.b", "c", 1) != idempotency_key("a", "b.c", 1)
    for bad in (0, -1, True, "1"):
        with pytest.raises(ValueError):
            idempotency_key("r", "1", bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        idempotency_key("", "1", 1)


def _expected_key(run_id: str, step: str, attempt: int) -> str:
    import hashlib

    text = json.dumps([run_id, step, attempt], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def test_idempotency_key_is_the_same_in_another_process() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from chainlang.journal.jsonl import idempotency_key as k; print(k('run-1', '3.1', 2))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert out == idempotency_key("run-1", "3.1", 2)


# --------------------------------------------------------------------------- speed


def test_hot_path_is_cheap(tmp_path: Path) -> None:
    """4,000 lines (a 2,000-step run) in well under a second, with and without secrets."""
    import time

    for secrets in ((), (SECRET,)):
        path = tmp_path / f"speed{len(secrets)}.jsonl"
        with TranscriptWriter(path, "r", secrets=secrets) as w:
            w.write("run_started")
            start = time.perf_counter()
            for i in range(2000):
                w.write("step_started", step=str(i), event="tools.x", inputs={"n": i})
                w.write("step_finished", step=str(i), event="tools.x", status="ok", result={"n": i}, duration_ms=1)
            elapsed = time.perf_counter() - start
        assert elapsed < 2.0, elapsed
        assert read_transcript(path).last_seq == 4001
