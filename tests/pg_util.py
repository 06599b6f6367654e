"""A real PostgreSQL server for the tests: `pg_server` (session-scoped, one per xdist worker)
initdb's a cluster in a temporary directory, starts it on 127.0.0.1 on a free port (its
unix socket in that directory), and gives each test that asks a new database
(`pg_url`). Stopped with `pg_ctl stop -m fast` at the end.

Skipped, with the reason, when the server binaries or psycopg are missing or the server
cannot start; never failed for that. PostgreSQL refuses to run as root: as root, the
cluster belongs to the `postgres` system user (Debian's package creates it).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

USER = "chainlang"


def server_bin() -> Path | None:
    """The directory of initdb and pg_ctl: $CHAINLANG_PG_BIN, Debian's newest, or the PATH's."""
    given = os.environ.get("CHAINLANG_PG_BIN")
    candidates = [given] if given else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2])
                         if p.split("/")[-2].isdigit() else 0, reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).parent))
    for directory in candidates:
        if (Path(directory) / "initdb").is_file() and (Path(directory) / "pg_ctl").is_file():
            return Path(directory)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    host: str
    port: int
    password: str
    socket_dir: Path
    _count: itertools.count[int] = field(default_factory=itertools.count)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}:{self.password}@{self.host}:{self.port}/{database}"

    def new_database(self) -> str:
        """Create an empty database; its url."""
        import psycopg

        name = f"store_{os.getpid()}_{next(self._count)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _run(cmd: list[str], as_user: str | None, **kw: object) -> subprocess.CompletedProcess[str]:
    if as_user is not None:
        cmd = ["runuser", "-u", as_user, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    bindir = server_bin()
    if bindir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql "
                    "package or set CHAINLANG_PG_BIN to their directory")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install 'chainlang[postgres]'")
    as_user = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user to run the server as")
        if shutil.which("runuser") is None:
            pytest.skip("running as root and runuser is missing: cannot start the server as postgres")
        as_user = "postgres"
    base = Path(tempfile.mkdtemp(prefix="chainlang-pg-"))
    data, log = base / "data", base / "server.log"
    password = secrets.token_hex(8)
    (base / "pw").write_text(password + "\n")
    if as_user is not None:
        os.chmod(base, 0o700)
        for path in (base, base / "pw"):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    started = False
    try:
        init = _run([str(bindir / "initdb"), "-D", str(data), "-U", USER, "--auth=scram-sha-256",
                     f"--pwfile={base / 'pw'}", "-E", "UTF8", "--locale=C", "--no-sync"], as_user)
        if init.returncode != 0:
            pytest.skip(f"initdb failed, so PostgreSQL cannot be tested here: {init.stderr.strip()[-500:]}")
        port = free_port()
        options = (f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off -c synchronous_commit=off "
                   "-c full_page_writes=off -c max_connections=100")
        start = _run([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60",
                      "start"], as_user)
        if start.returncode != 0:
            tail = log.read_text(errors="replace")[-800:] if log.exists() else start.stderr
            pytest.skip(f"PostgreSQL did not start ({start.stderr.strip()[-300:]}): {tail}")
        started = True
        yield PgServer("127.0.0.1", port, password, base)
    finally:
        if started:
            _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], as_user)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A new, empty database of the test server (its url, with the password)."""
    return pg_server.new_database()
