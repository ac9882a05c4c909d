"""bootstrap on several hosts: the database alone says whether the admin exists, no host keeps its
password, and hosts bootstrapping at once take turns.

Each host is a `manage.py` subprocess with a data dir of its own, on one real PostgreSQL database
made for the test. --no-demo leaves the store empty, so neither chromadb nor the broker is called.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = "postgres://postgres@127.0.0.1:5432"
SERVICES = ("DATABASE_URL", "CHROMA_URL", "CELERY_BROKER_URL")
# Each test bootstraps a PostgreSQL database it makes, whatever database the suite runs on.
pytestmark = pytest.mark.own_database


@pytest.fixture
def database():
    name = f"memoryui_bootstrap_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{SERVER}/{name}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def host_env(database: str, data_dir: Path, **extra: str) -> dict:
    inherited = {
        k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MEMORYUI_")) and k not in SERVICES
    }
    return {
        **inherited,
        "MEMORYUI_DATA_DIR": str(data_dir),
        "DATABASE_URL": database,
        "CHROMA_URL": "http://chroma.internal:8001",
        "CELERY_BROKER_URL": "redis://redis.internal:6379/0",
        "DJANGO_SECRET_KEY": "one-key-for-every-host-" + "k" * 30,
        **extra,
    }


def manage(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def bootstrap(env: dict) -> tuple[dict, str]:
    result = manage(env, "bootstrap", "--no-demo", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def password_works(env: dict, password: str) -> bool:
    code = (
        "from django.contrib.auth import get_user_model; "
        f"print(get_user_model().objects.get(username='admin').check_password({password!r}))"
    )
    result = manage(env, "shell", "-c", code)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1] == "True"


def test_the_admin_is_created_once_and_its_password_is_kept_on_no_host(database, tmp_path):
    first_host = host_env(database, tmp_path / "web-1")
    second_host = host_env(database, tmp_path / "web-2")

    report, shown = bootstrap(first_host)
    assert report["admin"] == {"username": "admin", "created": True, "password_file": None}
    assert report["seeded"] is None
    password = shown.split("password: ", 1)[1].split()[0]
    assert "kept nowhere" in shown and "changepassword" in shown
    assert not (tmp_path / "web-1" / "admin_password").exists()

    again, said = bootstrap(second_host)
    assert again["admin"] == {"username": "admin", "created": False, "password_file": None}
    assert password not in said and "password in" not in said
    assert not (tmp_path / "web-2" / "admin_password").exists()
    assert password_works(second_host, password)


def test_the_admin_password_can_come_from_the_environment(database, tmp_path):
    env = host_env(database, tmp_path / "web-1", MEMORYUI_ADMIN_PASSWORD="a-password-from-the-vault")

    report, shown = bootstrap(env)

    assert report["admin"]["created"] is True
    assert "a-password-from-the-vault" not in shown and "MEMORYUI_ADMIN_PASSWORD" in shown
    assert password_works(host_env(database, tmp_path / "worker-1"), "a-password-from-the-vault")


def test_hosts_bootstrapping_at_once_migrate_and_create_the_admin_once(database, tmp_path):
    hosts = [host_env(database, tmp_path / f"host-{n}") for n in range(3)]
    started = [
        subprocess.Popen(
            [sys.executable, "manage.py", "bootstrap", "--no-demo", "--json"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env in hosts
    ]
    outcomes = [process.communicate(timeout=300) + (process.returncode,) for process in started]

    assert [code for _, _, code in outcomes] == [0, 0, 0], [err for _, err, _ in outcomes]
    created = [json.loads(out)["admin"]["created"] for out, _, _ in outcomes]
    assert sorted(created) == [False, False, True]
    count = manage(hosts[0], "shell", "-c", "from django.contrib.auth.models import User; print(User.objects.count())")
    assert count.stdout.strip().splitlines()[-1] == "1"
