"""DJANGO_SECURE=1, the production switch, and the headers and limits read from the environment.

Settings are read once per process, so each configuration is loaded by `manage.py` in a subprocess
with exactly the environment the test names (none of the developer's DJANGO_/MEMORYUI_ variables).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SHOWN = [
    "DEBUG",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_PROXY_SSL_HEADER",
    "ALLOWED_HOSTS",
    "AXES_FAILURE_LIMIT",
    "MEMORYUI_API_RATE",
    "MEMORYUI_API_EXPENSIVE_RATE",
    "CACHES",
]


def manage(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "MEMORYUI_"))}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**inherited, "MEMORYUI_DATA_DIR": str(data_dir), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def settings_with(data_dir: Path, **env: str) -> dict:
    code = (
        "import json; from django.conf import settings as s; "
        f"print(json.dumps({{n: getattr(s, n) for n in {SHOWN!r}}} | "
        "{'AXES_COOLOFF_MINUTES': s.AXES_COOLOFF_TIME and s.AXES_COOLOFF_TIME.total_seconds() / 60}))"
    )
    result = manage(data_dir, "shell", "-c", code, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_check_deploy_finds_nothing_to_warn_about_with_the_production_switch_on(tmp_path):
    result = manage(
        tmp_path,
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECURE="1",
        DJANGO_ALLOWED_HOSTS="memory.example.com",
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_without_the_switch_check_deploy_still_names_what_production_needs(tmp_path):
    result = manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING")

    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr + result.stdout


def test_the_switch_means_https_only_hsts_for_a_year_secure_cookies_and_no_debug(tmp_path):
    shown = settings_with(tmp_path, DJANGO_SECURE="1", DJANGO_DEBUG="1", DJANGO_ALLOWED_HOSTS="a.example,b.example")

    assert shown["SECURE_SSL_REDIRECT"] is True
    assert shown["SECURE_HSTS_SECONDS"] == 365 * 24 * 3600
    assert shown["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True and shown["SECURE_HSTS_PRELOAD"] is True
    assert shown["SESSION_COOKIE_SECURE"] is True and shown["CSRF_COOKIE_SECURE"] is True
    assert shown["DEBUG"] is False  # DJANGO_DEBUG=1 does not survive the production switch
    assert shown["ALLOWED_HOSTS"] == ["a.example", "b.example"]
    assert shown["SECURE_PROXY_SSL_HEADER"] is None  # trusted only when named


def test_local_defaults_stay_as_they_were_without_the_switch(tmp_path):
    shown = settings_with(tmp_path)

    assert shown["SECURE_SSL_REDIRECT"] is False
    assert shown["SECURE_HSTS_SECONDS"] == 0
    assert shown["SESSION_COOKIE_SECURE"] is False and shown["CSRF_COOKIE_SECURE"] is False
    assert shown["ALLOWED_HOSTS"] == ["127.0.0.1", "localhost"]
    assert shown["SECURE_PROXY_SSL_HEADER"] is None


@pytest.mark.parametrize(
    "value",
    ["X-Forwarded-Proto,https", "HTTP_X_FORWARDED_PROTO,https", "x-forwarded-proto"],
)
def test_a_named_proxy_header_is_the_one_django_trusts_for_https(tmp_path, value):
    shown = settings_with(tmp_path, DJANGO_SECURE_PROXY_SSL_HEADER=value)

    assert shown["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_login_and_api_limits_are_read_from_the_environment(tmp_path):
    shown = settings_with(
        tmp_path,
        MEMORYUI_LOGIN_FAILURE_LIMIT="3",
        MEMORYUI_LOGIN_COOLOFF_MINUTES="2",
        MEMORYUI_API_RATE="100/hour",
        MEMORYUI_API_EXPENSIVE_RATE="off",
    )

    assert shown["AXES_FAILURE_LIMIT"] == 3 and shown["AXES_COOLOFF_MINUTES"] == 2
    assert shown["MEMORYUI_API_RATE"] == "100/hour"
    assert shown["MEMORYUI_API_EXPENSIVE_RATE"] is None
    assert settings_with(tmp_path, MEMORYUI_LOGIN_COOLOFF_MINUTES="0")["AXES_COOLOFF_MINUTES"] is None  # no end


def test_the_limits_count_in_a_cache_every_web_process_shares(tmp_path):
    embedded = settings_with(tmp_path)["CACHES"]["default"]
    assert embedded["BACKEND"] == "api.throttling.FileCache"  # files in the data dir, not each process's memory
    assert embedded["LOCATION"] == str(tmp_path.resolve() / "cache" / "django")

    shown = settings_with(tmp_path, MEMORYUI_CACHE_URL="redis://127.0.0.1:6379/1")

    assert shown["CACHES"]["default"] == {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:6379/1",
        "OPTIONS": {"socket_timeout": 2, "socket_connect_timeout": 2},
    }


def test_a_misspelt_rate_stops_start_up_naming_the_format(tmp_path):
    result = manage(tmp_path, "check", MEMORYUI_API_RATE="600 per minute")

    assert result.returncode != 0
    assert "A rate is `<count>/<second|minute|hour|day>` or `off`, not '600 per minute'" in result.stderr


# --- Content-Security-Policy -------------------------------------------------------------


def _policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {name: values for name, *values in (part.split() for part in header.split(";"))}


def test_every_page_carries_a_policy_without_inline_scripts_or_framing(alice_client):
    policy = _policy(alice_client.get("/memories/"))

    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]  # no 'unsafe-inline', no 'unsafe-eval', no nonce unused
    assert policy["style-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'self'"] and policy["form-action"] == ["'self'"]


def test_the_swagger_page_runs_its_one_inline_script_under_a_nonce_of_its_own(alice_client):
    first, second = alice_client.get("/api/docs/"), alice_client.get("/api/docs/")

    nonce = re.search(r"'nonce-([^']+)'", first["Content-Security-Policy"]).group(1)
    assert _policy(first)["script-src"] == ["'self'", f"'nonce-{nonce}'"]
    assert f'<script nonce="{nonce}">' in first.content.decode()
    assert f'<style nonce="{nonce}">' in first.content.decode()
    assert nonce not in second["Content-Security-Policy"]  # a new one each time


INLINE = [
    (re.compile(r"<script(?![^>]*\s(?:src|nonce)=)[^>]*>", re.I), "an inline <script> without a nonce"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "an inline event handler"),
    (re.compile(r"\shx-on", re.I), "hx-on (htmx evaluates it as code)"),
    (re.compile(r"\sstyle\s*=", re.I), "a style attribute"),
    (re.compile(r"<style(?![^>]*\snonce=)", re.I), "a <style> element without a nonce"),
    (re.compile(r"hx-trigger=\"[^\"]*\[", re.I), "an hx-trigger filter (htmx evaluates it as code)"),
]


def test_no_template_needs_what_the_policy_refuses():
    found = [
        f"{path.relative_to(ROOT)}: {what}"
        for path in sorted((ROOT / "templates").rglob("*.html"))
        for pattern, what in INLINE
        if pattern.search(path.read_text())
    ]

    assert found == []
