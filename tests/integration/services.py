"""Backing services of a test's own, for the fault-injection tests: a PostgreSQL cluster and a
Redis server on free ports in a temporary directory, which a test may stop, restart or freeze
(the machine's shared instances are never touched), and an HTTP client for memoryui's API as
an agent uses it. memoryui's own processes are the Procfile's lines (`procfile_processes`)."""

from __future__ import annotations

import http.client
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import redis

from tests.integration.test_worker_index_sync import _manage

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
REDIS_SERVER = "redis-server"
USERNAME = "alice"  # the operator; the agent's token is hers and sees every scope


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _log_tail(path: Path, size: int = 3000) -> str:
    return path.read_text(errors="replace")[-size:] if path.exists() else "(no log)"


class PrivatePostgres:
    """A PostgreSQL 15 cluster in a temporary directory, trust auth, on 127.0.0.1:<free port>.

    PostgreSQL refuses to run as root: when the tests do, the cluster's directory belongs to the
    `postgres` OS user and its commands run as that user. Use it as a context manager: it is
    stopped and removed however the test ends.
    """

    def __init__(self):
        missing = [name for name in ("initdb", "pg_ctl", "postgres") if not (POSTGRES_BIN / name).exists()]
        if missing:
            pytest.fail(
                f"PostgreSQL 15 server binaries missing under {POSTGRES_BIN}: {', '.join(missing)} "
                "(Debian package postgresql-15); the fault-injection tests start a cluster of their own.",
                pytrace=False,
            )
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        # Not under pytest's tmp_path: that is private to root, and the cluster runs as `postgres`.
        self.dir = Path(tempfile.mkdtemp(prefix="memoryui-pg-"))
        if self.as_postgres:
            owner = pwd.getpwnam("postgres")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"

    def __enter__(self) -> PrivatePostgres:
        try:
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
            self.start()
            with psycopg.connect(self._url("postgres"), autocommit=True) as admin:
                admin.execute("CREATE DATABASE memoryui")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def url(self) -> str:
        """The DATABASE_URL of the cluster's `memoryui` database."""
        return self._url("memoryui")

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(POSTGRES_BIN / program), *args]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if check:
            assert done.returncode == 0, f"{program} failed:\n{done.stderr}\n{_log_tail(self.log)}"
        return done

    def start(self) -> None:
        """Start the server; return once it accepts connections."""
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log), "-o", options)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`fast`: roll back open transactions and disconnect every client)."""
        self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.data))

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.url, autocommit=True) as connection:
            return connection.execute(sql, params).fetchall()

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data), check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis:
    """A redis-server on 127.0.0.1:<free port> with its data in `directory`.

    The append-only file is on, so what was queued survives a restart: a production Redis
    broker needs persistence for the same reason (without it, a restart of Redis loses every
    task waiting in a queue). Use it as a context manager: it is stopped however the test ends.
    """

    def __init__(self, directory: Path):
        if not shutil.which(REDIS_SERVER):
            pytest.fail("redis-server is not installed (Debian package redis-server)", pytrace=False)
        self.port = free_port()
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = self.dir / "redis.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> PrivateRedis:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # in case the test froze it
            self.process.kill()
            self.process.wait(timeout=10)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5, socket_connect_timeout=5)

    def start(self) -> None:
        """Start the server (on the same port and data as before); return once it answers."""
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "yes", "--dir", str(self.dir)],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 20
        while True:
            assert self.process.poll() is None, f"redis-server exited:\n{_log_tail(self.log)}"
            try:
                with self.client() as client:
                    if client.ping():
                        return
            except redis.ConnectionError:
                pass
            assert time.monotonic() < deadline, f"redis-server never answered:\n{_log_tail(self.log)}"
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server as an operator does (TERM: it writes its data and exits)."""
        self.process.terminate()
        self.process.wait(timeout=20)

    def freeze(self) -> None:
        """Leave the server running but unresponsive: connections stay open and nothing answers
        (what a hung broker, or one behind a dropped network path, looks like to a client)."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def queue_length(self, queue: str) -> int:
        with self.client() as client:
            return client.llen(queue)


def prepare_store(env: dict) -> str:
    """Migrate the configured database, create the user and an API token as an operator does;
    the token's key."""
    _manage(env, "migrate", "-v0")
    _manage({**env, "DJANGO_SUPERUSER_PASSWORD": "alice-password-1"},
            "createsuperuser", "--noinput", "--username", USERNAME, "--email", "alice@example.com")  # fmt: skip
    return json.loads(_manage(env, "api_token", "create", "agent", "--user", USERNAME, "--json"))["key"]


@dataclass
class Answer:
    """One HTTP exchange: the status (None when no answer came), the body, and when it ran."""

    status: int | None
    content_type: str
    body: object
    raw: str
    started: float
    finished: float

    @property
    def error_code(self) -> str | None:
        error = self.body.get("error") if isinstance(self.body, dict) else None
        return error.get("code") if isinstance(error, dict) else None


class Api:
    """memoryui's REST API as an agent calls it: JSON over HTTP with a bearer token, a new
    connection per call."""

    def __init__(self, port: int, token: str, timeout: float = 60):
        self.port = port
        self.token = token
        self.timeout = timeout

    def call(self, method: str, path: str, payload: dict | None = None) -> Answer:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        body = None
        if payload is not None:
            body = json.dumps(payload).encode()
            headers["Content-Type"] = "application/json"
        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            raw = response.read().decode("utf-8", errors="replace")
            status, content_type = response.status, response.getheader("Content-Type", "")
        except OSError as exc:  # refused, reset, timed out: no answer
            raw, status, content_type = f"{type(exc).__name__}: {exc}", None, ""
        finally:
            connection.close()
        try:
            parsed = json.loads(raw) if content_type.startswith("application/json") else None
        except ValueError:
            parsed = None
        return Answer(status, content_type, parsed, raw, started, time.monotonic())

    def write_memory(self, text: str) -> Answer:
        return self.call("POST", "/api/memories/", {"scope": "agent:main", "kind": "note", "text": text})

    def wait_until_serving(self, processes: dict[str, subprocess.Popen], logs: Path, timeout: float = 90) -> None:
        """Until the API answers an authenticated read, every process still running."""
        deadline = time.monotonic() + timeout
        while True:
            for name, process in processes.items():
                assert process.poll() is None, f"{name} exited:\n{_log_tail(logs / f'{name}.log')}"
            if self.call("GET", "/api/memories/").status == 200:
                return
            assert time.monotonic() < deadline, f"the API never answered:\n{_log_tail(logs / 'web.log')}"
            time.sleep(0.2)
