"""`chainlang lsp` driven as an editor drives it: JSON-RPC over the stdio of a
real `python -m chainlang lsp` process, with Content-Length framing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from tests.lsp_util import TIMEOUT, TRUSTED, Client, finish, started


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    c = started(tmp_path)
    yield c
    finish(c)


@pytest.fixture
def trusted_client(tmp_path: Path) -> Iterator[Client]:
    """A server whose editor trusts the workspace: the project's tools are loaded."""
    c = started(tmp_path, TRUSTED)
    yield c
    finish(c)


def test_diagnostics_as_you_type(client: Client, tmp_path: Path) -> None:
    uri = client.open(tmp_path / "a.chain.yaml", "steps:\n  - tools.nwo\n")
    [diag] = client.diagnostics(uri, 1)
    assert diag["code"] == "CL014"
    assert diag["severity"] == 1
    assert diag["range"] == {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 13}}
    assert "unknown event 'tools.nwo'" in diag["message"] and "did you mean 'tools.now'?" in diag["message"]
    assert "codeDescription" not in diag  # no docs site known: no placeholder link
    client.change(uri, "steps:\n  - tools.now\n", 2)
    assert client.diagnostics(uri, 2) == []
    client.change(uri, "steps:\n  - tools.now\n  - x: [\n", 3)
    [syntax] = client.diagnostics(uri, 3)
    assert syntax["code"] == "CL001"
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == []
    assert client.close() == 0


def test_rapid_changes_check_the_last_text(client: Client, tmp_path: Path) -> None:
    uri = client.open(tmp_path / "a.chain.yaml", "steps:\n  - tools.now\n")
    assert client.diagnostics(uri, 1) == []
    for version in range(2, 30):
        client.change(uri, f"steps:\n  - tools.no{'w' * (version % 3)}\n  - bad.{'x' * version}\n", version)
    # the first publish after the burst is the last text's: superseded texts were not checked
    final = client.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)
    assert final["version"] == 29
    assert [d["code"] for d in final["diagnostics"]] == ["CL014", "CL014"]
    time.sleep(0.5)
    client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
    assert not [n for n in client.notes if n.get("method") == "textDocument/publishDiagnostics"]


def test_docs_link_when_the_site_is_known(tmp_path: Path) -> None:
    c = Client(tmp_path, docs_url="https://docs.example.org/chainlang")
    try:
        c.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        c.notify("initialized", {})
        uri = c.open(tmp_path / "a.chain.yaml", "steps:\n  - tools.nwo\n")
        [diag] = c.diagnostics(uri, 1)
        assert diag["codeDescription"]["href"] == "https://docs.example.org/chainlang/checks/unknown-event/"
        hover = c.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
        assert hover is None
    finally:
        c.proc.kill()
        c.proc.wait(timeout=TIMEOUT)


def test_completion_of_events_keys_and_params(client: Client, tmp_path: Path) -> None:
    text = ("steps:\n"
            "  - event: tools.date_calc\n"   # 1
            "    params:\n"                   # 2
            "      \n"                        # 3
            "  - tools.date_calc: {from: x, }\n"  # 4
            "  - \n"                          # 5
            "lim\n")                          # 6
    uri = client.open(tmp_path / "c.chain.yaml", text)
    events = client.complete(uri, 1, len("  - event: tools.d"))
    assert events == ["tools.date_calc"]  # the ones the typed part begins
    events = client.complete(uri, 1, len("  - event: "))
    assert {"tools.date_calc", "tools.now", "user.notify", "agent.chain"} <= set(events)
    params = client.complete(uri, 3, 6)
    assert {"from", "add", "subtract", "find", "format"} <= set(params)
    flow = client.complete(uri, 4, len("  - tools.date_calc: {from: x, "))
    assert "add" in flow and "tools.now" not in flow
    step = client.complete(uri, 5, 4)
    assert {"tools.now", "event", "parallel", "if", "retry"} <= set(step)
    top = client.complete(uri, 6, 3)
    assert {"limits", "outputs", "allow", "chain"} <= set(top) and "steps" not in top  # written already
    result = client.request("textDocument/completion", {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 6}})
    items = result["items"] if isinstance(result, dict) else result
    [from_item] = [i for i in items if i["label"] == "from"]
    assert "required" in from_item["detail"] and from_item["documentation"]["value"].startswith("The starting point")
    # every key offered says what it is (the schemas describe each key)
    for line, character in ((5, 4), (6, 3)):
        result = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                            "position": {"line": line, "character": character}})
        keys = [i for i in (result["items"] if isinstance(result, dict) else result) if i.get("kind") == 10]
        assert keys and all(i.get("detail") for i in keys), [i["label"] for i in keys if not i.get("detail")]
        assert line == 6 or {"description", "decide", "retry"} <= {i["label"] for i in keys}


def test_completion_in_hooks(client: Client, tmp_path: Path) -> None:
    text = ("- trigger: pre:tools.\n"
            "  \n"                                  # 1
            "- trigger: pre:tools.date_calc\n"
            "  set: {}\n"                            # 3
            "  action:\n"
            "    - \n")                              # 5
    uri = client.open(tmp_path / "h.hooks.yaml", text)
    assert "tools.now" in client.complete(uri, 0, len("- trigger: pre:tools."))
    keys = client.complete(uri, 1, 2)
    assert {"condition", "action", "cancel"} <= set(keys) and "trigger" not in keys
    assert "from" in client.complete(uri, 3, len("  set: {"))  # a pre: hook sets the event's params
    assert {"tools.now", "event"} <= set(client.complete(uri, 5, 6))  # an action is steps
    mapping = client.open(tmp_path / "m.hooks.yaml", "events:\n  crm.signup:\n    \nhooks: []\n\n")
    assert client.complete(mapping, 2, 4) == ["description", "payload"]
    assert client.complete(mapping, 4, 0) == ["chainlang", "description"]  # the unwritten top-level keys


def test_saving_a_hooks_file_rechecks_open_chains(client: Client, tmp_path: Path) -> None:
    chain = client.open(tmp_path / "a.chain.yaml", "steps:\n  - tools.now\n")
    assert client.diagnostics(chain, 1) == []
    hooks = tmp_path / "b.hooks.yaml"
    hooks.write_text("- trigger: pre:tools.now\n  condition: 'no_such_field > 1'\n  cancel: true\n")
    other = client.open(hooks, hooks.read_text())
    assert client.diagnostics(other, 1)
    client.notify("textDocument/didSave", {"textDocument": {"uri": other}})
    assert client.diagnostics(chain, 1) == []  # checked again: a second publish for the chain


def test_hover(client: Client, tmp_path: Path) -> None:
    uri = client.open(tmp_path / "h.chain.yaml", "steps:\n  - event: tools.date_calc\n")
    result = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 16}})
    value = result["contents"]["value"]
    assert value.startswith("**tools.date_calc**") and "Date arithmetic" in value and "params:" in value
    assert '"from"' in value  # the params schema
    assert result["range"] == {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 26}}
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 1}}) is None


def test_project_tools_and_named_chains(trusted_client: Client, tmp_path: Path) -> None:
    client = trusted_client
    (tmp_path / "chainlang.toml").write_text('tools = ["tools.py"]\nchains = ["chains"]\n')
    (tmp_path / "tools.py").write_text(
        "import os\nfrom chainlang import event\n\n"
        "print('tools loaded')  # stdout is the protocol's: this must not reach the editor\n"
        "os.system('echo from a subprocess')\n"
        "@event('crm.lookup', description='Look a customer up')\n"
        "def lookup(email: str) -> dict:\n"
        "    return {}\n")
    (tmp_path / "chains").mkdir()
    (tmp_path / "chains" / "weekly.chain.yaml").write_text("chain: reports.weekly\nsteps:\n  - tools.now\n")
    sub = tmp_path / "flows"
    sub.mkdir()
    uri = client.open(sub / "a.chain.yaml", "steps:\n  - crm.lookup: {email: a@b.c}\n  - reports.weekly\n  - event: \n")
    # the tool's event and the named chain resolve: only the unfinished step is reported
    assert [d["code"] for d in client.diagnostics(uri, 1)] == ["CL011"]
    names = client.complete(uri, 3, len("  - event: "))
    assert {"crm.lookup", "reports.weekly", "tools.now"} <= set(names)
    assert "email" in client.complete(uri, 1, len("  - crm.lookup: {"))
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 6}})
    assert "Look a customer up" in hover["contents"]["value"]
    # a tool added to tools.py is known once a document is saved (the tools file is imported again)
    tools = tmp_path / "tools.py"
    tools.write_text(tools.read_text() + "\n@event('crm.update', description='Update a customer')\ndef update() -> dict:\n    return {}\n")
    later = tools.stat().st_mtime + 5
    os.utime(tools, (later, later))
    client.change(uri, "steps:\n  - crm.update\n", 2)
    assert [d["code"] for d in client.diagnostics(uri, 2)] == ["CL014"]  # not saved yet: the cached project
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri, 2) == []


def test_broken_project_is_reported_not_fatal(trusted_client: Client, tmp_path: Path) -> None:
    client = trusted_client
    (tmp_path / "chainlang.toml").write_text('tools = ["missing_module_xyz"]\n')
    uri = client.open(tmp_path / "a.chain.yaml", "steps:\n  - tools.now\n")
    [diag] = client.diagnostics(uri, 1)
    assert "cannot check" in diag["message"] and "missing_module_xyz" in diag["message"]
    assert client.close() == 0


def test_garbage_and_huge_input(client: Client, tmp_path: Path) -> None:
    client.send_raw(b"this is not json")
    client.send({"id": 99, "method": "no/such/method", "params": {}})
    client.send({"method": "textDocument/didOpen", "params": {"bogus": True}})
    huge = "steps:\n" + "  - tools.now\n" * 400_000  # past the checker's 4 MiB limit
    uri = client.open(tmp_path / "big.chain.yaml", huge)
    codes = {d["code"] for d in client.diagnostics(uri, 1)}
    assert codes == {"CL004"}
    client.complete(uri, 5, 4)
    binary = client.open(tmp_path / "bin.chain.yaml", "\x00\x01\ufffe" + "é" * 50 + "\n- [ {\n")
    assert all(d["code"].startswith("CL") for d in client.diagnostics(binary, 1))
    other = client.open(tmp_path / "notes.txt", "hello")  # not a chain: left alone
    assert client.complete(other, 0, 2) == []
    assert client.close() == 0  # still answering after all that


def test_completion_knows_what_is_written(client: Client, tmp_path: Path) -> None:
    text = ("allow:\n"
            "  - tools.\n"                                    # 1: an allow item
            "steps:\n"
            "  - id: first\n"
            "    \n"                                          # 4: compact step: options and events
            "    timeout: 5s\n"
            "  - event: tools.date_calc\n"
            "    params: {from: x, }\n"                       # 7: `from` is written already
            "  - event: tools.now\n"
            "    \n"                                          # 9: a canonical step's keys
            "    id: later\n")
    uri = client.open(tmp_path / "k.chain.yaml", text)
    assert {"tools.now", "tools.date_calc"} <= set(client.complete(uri, 1, len("  - tools.")))
    compact = client.complete(uri, 4, 4)
    assert {"tools.now", "retry", "if", "event"} <= set(compact)
    assert "id" not in compact and "timeout" not in compact  # above and below the cursor
    flow = client.complete(uri, 7, len("    params: {from: x, "))
    assert "add" in flow and "from" not in flow
    canonical = client.complete(uri, 9, 4)
    assert {"params", "retry"} <= set(canonical)
    assert not {"event", "id", "tools.now", "parallel", "then"} & set(canonical)


def test_incremental_changes_and_utf16_positions(client: Client, tmp_path: Path) -> None:
    uri = client.open(tmp_path / "u.chain.yaml", "steps:\n  - user.notify: {message: \"😀\"}\n  - tools.now\n")
    assert client.diagnostics(uri, 1) == []
    # replace `now` with `nwo` by a ranged edit, as editors send them
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 2, "character": 10}, "end": {"line": 2, "character": 13}}, "text": "nwo"}]})
    [diag] = client.diagnostics(uri, 2)
    assert diag["range"]["start"] == {"line": 2, "character": 4}
    # on a line after an astral character, columns count UTF-16 code units
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3},
                                             "contentChanges": [{"text": "steps:\n  - {user.notify: {message: \"😀\"}, retyr: 1}\n"}]})
    [diag] = client.diagnostics(uri, 3)
    assert diag["code"] == "CL010"
    line = "  - {user.notify: {message: \"😀\"}, retyr: 1}"
    col = len(line[: line.index("retyr")].encode("utf-16-le")) // 2
    assert diag["range"]["start"] == {"line": 1, "character": col}
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 1, "character": col + 1}})
    assert hover is None  # a key, not an event


def test_hover_on_a_rule_code(client: Client, tmp_path: Path) -> None:
    uri = client.open(tmp_path / "r.chain.yaml", "# see CL014\nsteps:\n  - tools.now\n")
    hover = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 8}})
    assert "unknown-event" in hover["contents"]["value"]


def test_without_pygls_a_clear_error(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['pygls'] = None\n"
            "from chainlang.cli.main import main\n"
            "main(['lsp'], prog_name='chainlang')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "chainlang: error: chainlang lsp needs the lsp extra: pip install 'chainlang[lsp]'"


def test_a_checker_crash_is_logged_not_fatal(tmp_path: Path) -> None:
    code = ("import chainlang.lsp.server as server\n"
            "def broken(path, text, projects):\n"
            "    if 'boom' in text:\n"
            "        raise RuntimeError('checker bug')\n"
            "    return original(path, text, projects)\n"
            "original, server.check_document = server.check_document, broken\n"
            "from chainlang.lsp import serve_stdio\n"
            "serve_stdio()\n")
    c = Client(tmp_path, argv=[sys.executable, "-c", code])
    try:
        c.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        c.notify("initialized", {})
        uri = c.open(tmp_path / "a.chain.yaml", "steps:\n  - tools.nwo\n")
        assert [d["code"] for d in c.diagnostics(uri, 1)] == ["CL014"]
        c.change(uri, "steps:\n  - boom.now\n", 2)
        log = c.wait_note("window/logMessage", lambda p: "checker bug" in p["message"])
        assert log["type"] == 1 and "RuntimeError" in log["message"]
        c.change(uri, "steps:\n  - tools.now\n", 3)
        # the server goes on, and published nothing for version 2: the next publish is version 3's
        after = c.wait_note("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)
        assert after["version"] == 3 and after["diagnostics"] == []
        assert c.close() == 0
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
            c.proc.wait(timeout=TIMEOUT)


HOVER = b'{"jsonrpc": "2.0", "id": %d, "method": "textDocument/hover", "params": {"textDocument": {"uri": "file:///x.chain.yaml"}, "position": {"line": 0, "character": 0}}}'


@pytest.mark.parametrize("frame, logged", [
    (b"Content-Length: abc\r\n\r\n" + HOVER % 1, "Content-Length is not a whole number of bytes: 'abc'"),
    (b"Content-Length: -5\r\n\r\n" + HOVER % 1, "Content-Length is not a whole number of bytes: '-5'"),
    (b"Content-Length: 1e3\r\n\r\n" + HOVER % 1, "not a whole number"),
    (b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + HOVER % 1, "a message without a Content-Length header"),
    (b"Content-Length: 0\r\n\r\n", "Content-Length 0"),
    (b"hello there\r\n\r\n" + HOVER % 1, "not a message header: 'hello there'"),
    (b"Content-Length: " + b"9" * 30 + b"\r\n\r\n{}", "not a whole number"),
    (b"X-Padding: " + b"x" * 20_000 + b"\r\n\r\n{}", "a message header over 8192 bytes"),
])
def test_a_bad_frame_is_logged_and_the_next_one_answered(client: Client, frame: bytes, logged: str) -> None:
    client.write(frame)
    line = client.wait_stderr(logged)
    assert line.startswith("chainlang lsp: error: ") and "looking for the next message" in line
    # the stream is found again: the next well-formed request is answered
    assert client.request("textDocument/hover", {"textDocument": {"uri": "file:///x.chain.yaml"},
                                                 "position": {"line": 0, "character": 0}}) is None
    assert not any("Traceback" in text for text in client.stderr)
    assert client.close() == 0


def test_header_names_in_any_case_are_read(client: Client) -> None:
    body = HOVER % 7
    client.write(b"content-length:%d\r\ncontent-type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" % len(body) + body)
    assert client.response(7, "response to a lower-case header") is None


def _peak_memory_kib(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), None)


def test_a_huge_content_length_allocates_nothing(client: Client) -> None:
    client.write(b"Content-Length: 1000000000000\r\n\r\n" + HOVER % 1)
    line = client.wait_stderr("over the limit")
    assert "1000000000000 bytes" in line and str(64 * 1024 * 1024) in line
    assert client.request("textDocument/hover", {"textDocument": {"uri": "file:///x.chain.yaml"},
                                                 "position": {"line": 0, "character": 0}}) is None
    peak = _peak_memory_kib(client.proc.pid)
    assert peak is None or peak < 1024 * 1024, f"peak memory {peak} KiB"  # nothing near the declared size
    assert not any("MemoryError" in text or "Traceback" in text for text in client.stderr)
    assert client.close() == 0


def test_input_ending_inside_a_message_ends_the_server_cleanly(client: Client) -> None:
    client.write(b"Content-Length: 500\r\n\r\n{\"jsonrpc\": ")
    assert client.proc.stdin is not None
    client.proc.stdin.close()
    assert client.proc.wait(timeout=TIMEOUT) == 0
    client.wait_stderr("the input ended inside a message (12 of 500 bytes)")
    assert not any("Traceback" in text for text in client.stderr)


def test_frame_reader_skips_a_body_over_the_limit() -> None:
    import io

    from chainlang.lsp.framing import FrameReader

    big = b'{"text": "' + b"x" * 5000 + b'"}'
    small = b'{"id": 1}'
    stream = io.BytesIO(b"Content-Length: %d\r\n\r\n" % len(big) + big + b"Content-Length: %d\r\n\r\n" % len(small) + small)
    problems: list[str] = []
    reader = FrameReader(stream, problems.append, max_body=1000)
    assert reader.next_body() == small
    assert reader.next_body() is None
    assert problems == ["a message of 5012 bytes is over the limit of 1000 bytes: skipped (the request gets no "
                        "answer); looking for the next message"]


def test_frame_reader_gets_past_an_endless_header_line() -> None:
    import io

    from chainlang.lsp.framing import FrameReader

    small = b'{"id": 2}'
    stream = io.BytesIO(b"Content-Length: " + b"9" * 200_000 + b"\r\n\r\n{}" + b"Content-Length: %d\r\n\r\n" % len(small) + small)
    problems: list[str] = []
    reader = FrameReader(stream, problems.append)
    got: list[bytes | None] = []
    worker = threading.Thread(target=lambda: got.append(reader.next_body()), daemon=True)
    worker.start()
    worker.join(TIMEOUT)
    assert not worker.is_alive(), "the reader is stuck on the long header"
    assert got == [small]
    assert problems[0].startswith("a message header over 8192 bytes")
