"""The API against its own schema: schemathesis generates requests from /api/schema/ (a fixed
seed, a bounded number of examples per operation), positive and negative, and sends them with
a token to the real gunicorn serving memoryui (the Procfile's worker class, so its own 414 is
JSON too). Every check is on: no 5xx, every status documented, every answer as the schema
describes it, and every request the schema allows accepted and every one it forbids refused.
The one setting that differs from schemathesis' defaults is in schemathesis.toml beside this file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).with_name("schemathesis.toml")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database(env: dict) -> str | None:
    """A database of the test's own on the PostgreSQL of DATABASE_URL, or None on SQLite."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        return None
    name = f"memoryui_fuzz_{uuid.uuid4().hex[:8]}"
    subprocess.run(_psql(url, f'CREATE DATABASE "{name}"'), check=True, capture_output=True)
    parts = urlsplit(url)
    env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
    return name


def _psql(url: str, sql: str) -> list[str]:
    parts = urlsplit(url)
    return ["psql", "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432), "-U",
            parts.username or "postgres", "-d", "postgres", "-c", sql]  # fmt: skip


def _manage(env: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _wait_for(url: str, server: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert server.poll() is None, log.read_text()[-3000:]
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers (401 without a token)
        except OSError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.3)


def test_the_api_answers_every_generated_request_as_its_schema_says(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(
        MEMORYUI_DATA_DIR=str(tmp_path / "data"),
        CELERY_TASK_DEFAULT_QUEUE=f"memoryui-fuzz-{uuid.uuid4().hex[:8]}",
        # The fuzzer sends a few thousand requests in a minute: the throttles are tested elsewhere.
        MEMORYUI_API_RATE="1000000/min",
        MEMORYUI_API_EXPENSIVE_RATE="1000000/min",
    )
    database = _database(env)
    port = _free_port()
    server = None
    try:
        _manage(env, "migrate", "-v0")
        _manage(env, "seed_demo", "--json")
        _manage(env, "shell", "-c", "from django.contrib.auth import get_user_model as m; "
                "m().objects.create_superuser('fuzz', 'fuzz@example.com', 'fuzz-password-1')")  # fmt: skip
        token = json.loads(_manage(env, "api_token", "create", "fuzz", "--user", "fuzz", "--json"))["key"]
        # The server's log goes to a file: a pipe nobody reads would fill up and block it.
        log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed with the server below
        server = subprocess.Popen(
            [str(BIN / "gunicorn"), "memoryui.wsgi", "--worker-class", "memoryui.server.ThreadWorker",
             "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4", "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/api/", server, tmp_path / "server.log")
        run = subprocess.run(
            [str(BIN / "schemathesis"), "--config-file", str(CONFIG), "run", f"{base}/api/schema/",
             "-H", f"Authorization: Bearer {token}", "--checks", "all", "--seed", "7",
             "--max-examples", "20", "--phases", "examples,coverage,fuzzing", "--no-color"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        output = run.stdout + run.stderr
        tested = re.search(r"Tested: (\d+)", output)
        assert tested and int(tested.group(1)) >= 40, output[-3000:]  # every operation of the API
        assert run.returncode == 0, output[-8000:]
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)
            log.close()
        if database:
            subprocess.run(_psql(os.environ["DATABASE_URL"], f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'),
                           capture_output=True)  # fmt: skip
        shutil.rmtree(tmp_path / "data", ignore_errors=True)


def test_the_web_servers_own_refusals_are_json_too(tmp_path):
    """gunicorn answers a request line or headers over its limits before Django sees them: with
    memoryui's worker class, in the API's error shape (414, 431), never an HTML page."""
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env["MEMORYUI_DATA_DIR"] = str(tmp_path / "data")
    _manage(env, "migrate", "-v0")
    port = _free_port()
    with open(tmp_path / "server.log", "w") as log:
        server = subprocess.Popen(
            [str(BIN / "gunicorn"), "memoryui.wsgi", "--worker-class", "memoryui.server.ThreadWorker",
             "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "2", "--log-level", "warning"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True,
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_for(f"{base}/api/", server, tmp_path / "server.log")
            answers = {}
            for name, request in {
                "long line": urllib.request.Request(f"{base}/api/memories/?q={'a' * 5000}"),
                "big headers": urllib.request.Request(f"{base}/api/memories/", headers={"X-Big": "b" * 9000}),
            }.items():
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(request, timeout=10)
                answers[name] = (refused.value.code, refused.value.headers["Content-Type"], json.load(refused.value))
        finally:
            server.terminate()
            server.wait(timeout=20)
    code, content_type, body = answers["long line"]
    assert (code, content_type, body["error"]["code"]) == (414, "application/json", "uri_too_long")
    assert body["error"]["details"]["limit_bytes"] == 4094
    code, content_type, body = answers["big headers"]
    assert (code, content_type, body["error"]["code"]) == (431, "application/json", "headers_too_large")
