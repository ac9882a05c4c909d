"""Several hosts, no shared disk: where the secret key may come from.

With PostgreSQL, a chromadb server, the PostgreSQL BM25 index and a networked broker, every host
has a data dir of its own, so a key generated into one would be that host's alone: memoryui then
refuses to start without DJANGO_SECRET_KEY. Anything less keeps state in the data dir (one host),
where a generated key is still fine. Settings are read once per process, so each configuration is
loaded by `manage.py` in a subprocess with exactly the environment the test names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
POSTGRES = "postgres://postgres@127.0.0.1:5432/memoryui_multi_host_settings"
# Settings only: nothing here connects to these services.
MULTI_HOST = {
    "DATABASE_URL": POSTGRES,
    "CHROMA_URL": "http://chroma.internal:8001",
    "CELERY_BROKER_URL": "redis://redis.internal:6379/0",
}
SHOW = (
    "from django.conf import settings as s; from django.core import signing; "
    "print(s.MEMORYUI_MULTI_HOST, s.MEMORYUI_LEXICAL, s.SECRET_KEY[:12], signing.dumps('hello'))"
)
SERVICES = ("DATABASE_URL", "CHROMA_URL", "CELERY_BROKER_URL")
# Each configuration is loaded in a process given exactly its environment, whatever database the
# suite runs on.
pytestmark = pytest.mark.own_database


def manage(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    inherited = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MEMORYUI_")) and k not in SERVICES
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**inherited, "MEMORYUI_DATA_DIR": str(data_dir), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def shown(data_dir: Path, **env: str) -> list[str]:
    result = manage(data_dir, "shell", "-c", SHOW, **env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1].split(" ")


def test_several_hosts_without_a_secret_key_refuse_to_start_and_say_which_variable(tmp_path):
    result = manage(tmp_path, "check", **MULTI_HOST)

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "Set DJANGO_SECRET_KEY" in result.stderr
    assert not (tmp_path / "secret_key").exists()


def test_a_key_left_in_the_data_dir_is_named_but_not_used_on_several_hosts(tmp_path):
    manage(tmp_path, "check")  # a one-host start generated a key here
    assert (tmp_path / "secret_key").exists()

    result = manage(tmp_path, "check", **MULTI_HOST)

    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr and str(tmp_path / "secret_key") in result.stderr


def test_hosts_with_separate_data_dirs_and_the_same_key_accept_each_others_signatures(tmp_path):
    env = {**MULTI_HOST, "DJANGO_SECRET_KEY": "the-same-key-on-every-host-" + "x" * 30}
    multi_host, lexical, key_start, signed = shown(tmp_path / "web-1", **env)
    assert (multi_host, lexical, key_start) == ("True", "postgres", "the-same-key")

    check = f"from django.core import signing; print(signing.loads({signed!r}))"
    result = manage(tmp_path / "web-2", "shell", "-c", check, **env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "hello"
    other_key = manage(tmp_path / "web-3", "shell", "-c", check, **{**env, "DJANGO_SECRET_KEY": "another-" + "y" * 40})
    assert other_key.returncode != 0 and "BadSignature" in other_key.stderr
    assert not (tmp_path / "web-1" / "secret_key").exists() and not (tmp_path / "web-2" / "secret_key").exists()


def test_postgresql_on_one_host_still_generates_its_key_into_the_data_dir(tmp_path):
    # An embedded chromadb and broker live in the data dir: this deployment is one host anyway.
    first = shown(tmp_path, DATABASE_URL=POSTGRES)
    again = shown(tmp_path, DATABASE_URL=POSTGRES)

    assert first[:2] == ["False", "postgres"]
    assert (tmp_path / "secret_key").read_text().startswith(first[2])
    assert again[2] == first[2]


def test_any_state_left_in_the_data_dir_keeps_a_deployment_on_one_host(tmp_path):
    one_host = [
        {**MULTI_HOST, "MEMORYUI_LEXICAL": "whoosh"},  # BM25 files in the data dir
        {**MULTI_HOST, "CELERY_BROKER_URL": ""},  # the embedded broker file
        {**MULTI_HOST, "CHROMA_URL": ""},  # the embedded chromadb
        {**MULTI_HOST, "DATABASE_URL": ""},  # SQLite
    ]
    for number, env in enumerate(one_host):
        multi_host, *_ = shown(tmp_path / str(number), **env)
        assert multi_host == "False", env
        assert (tmp_path / str(number) / "secret_key").exists(), env
