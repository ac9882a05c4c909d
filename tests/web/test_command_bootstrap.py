"""bootstrap: migrate, seed an empty store, create the admin once and never show its password again."""

from __future__ import annotations

import io
import json
import stat

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from memoryui.models import Memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_dir(tmp_path, settings, monkeypatch):
    settings.DATA_DIR = tmp_path
    monkeypatch.delenv("MEMORYUI_ADMIN_PASSWORD", raising=False)
    return tmp_path


def bootstrap(*args) -> str:
    out = io.StringIO()
    call_command("bootstrap", *args, stdout=out, stderr=out)
    return out.getvalue()


def test_first_run_creates_the_admin_and_shows_the_password_once(data_dir):
    output = bootstrap()
    password_file = data_dir / "admin_password"
    password = password_file.read_text().strip()
    assert len(password) >= 16
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert f"password: {password}" in output
    assert "http://127.0.0.1:8000/" in output and "username: admin" in output
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)


def test_the_printed_login_names_the_address_being_served(data_dir):
    output = bootstrap("--url", "http://127.0.0.1:8765/")
    assert "memoryui is ready at http://127.0.0.1:8765/" in output
    assert "8000" not in output


def test_later_runs_never_print_or_change_the_password(data_dir):
    bootstrap()
    password = (data_dir / "admin_password").read_text().strip()
    output = bootstrap()
    assert password not in output
    assert "Admin login: admin (password in " in output and "admin_password" in output
    assert (data_dir / "admin_password").read_text().strip() == password
    assert get_user_model().objects.get(username="admin").check_password(password)
    assert get_user_model().objects.count() == 1


def test_an_existing_superuser_means_no_admin_is_created(data_dir, alice):
    output = bootstrap()
    assert "Admin login: alice" in output
    assert not get_user_model().objects.filter(username="admin").exists()
    assert not (data_dir / "admin_password").exists()


def test_the_password_can_come_from_the_environment(data_dir, monkeypatch):
    monkeypatch.setenv("MEMORYUI_ADMIN_PASSWORD", "from-the-script-123")
    output = bootstrap()
    assert "from-the-script-123" not in output
    assert get_user_model().objects.get(username="admin").check_password("from-the-script-123")
    assert not (data_dir / "admin_password").exists()


def test_an_empty_store_gets_the_clean_and_the_polluted_demo(data_dir):
    report = json.loads(_stdout_of_json_run())
    assert report["seeded"]["polluted"] == 85 and report["seeded"]["clean"] > 40
    stats = Memory.objects.stats()
    assert stats["by_scope"]["agent:main"] == 81 and stats["by_scope"]["agent:test-w"] == 4
    assert stats["by_scope"]["agent:assistant"] > 0


def test_a_store_with_memories_is_not_seeded(data_dir, make_memory):
    make_memory("mine")
    report = json.loads(_stdout_of_json_run())
    assert report["seeded"] is None
    assert Memory.objects.count() == 1


def test_no_demo_leaves_an_empty_store_empty_and_still_creates_the_admin(data_dir):
    output = bootstrap("--no-demo")
    assert Memory.objects.count() == 0
    assert "loaded the demo" not in output
    assert get_user_model().objects.get(username="admin").is_superuser


def test_json_keeps_stdout_to_one_document_and_leaves_the_password_out(data_dir):
    stdout = _stdout_of_json_run()
    report = json.loads(stdout)
    password = (data_dir / "admin_password").read_text().strip()
    assert password not in stdout
    assert report["admin"] == {"username": "admin", "created": True, "password_file": str(data_dir / "admin_password")}


def _stdout_of_json_run() -> str:
    out = io.StringIO()
    call_command("bootstrap", "--json", stdout=out, stderr=io.StringIO())
    return out.getvalue()
