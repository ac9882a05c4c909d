"""Two web hosts with data dirs of their own, one PostgreSQL: a sign-in on one is a sign-in on the
other, and the other accepts its CSRF token. Each host is gunicorn as deploy/Procfile.web starts it.
"""

from __future__ import annotations

import http.cookiejar
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.integration.services import free_port
from tests.web.test_command_bootstrap_multi_host import ROOT, database, host_env, manage

__all__ = ["database"]  # the fixture, used by name

pytestmark = [pytest.mark.e2e, pytest.mark.own_database]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _serve(env: dict, port: int, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi",
            "--worker-class",
            "config.server.ThreadWorker",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "2",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )


def _wait_for(url: str, server: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert server.poll() is None, log.read_text()[-3000:]
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.3)


def test_a_sign_in_on_one_web_host_holds_on_another(database, tmp_path):
    env = host_env(database, tmp_path / "bootstrap", MEMORYUI_ADMIN_PASSWORD="two-hosts-one-login")
    assert manage(env, "bootstrap", "--no-demo").returncode == 0
    ports = [free_port(), free_port()]
    logs = [tmp_path / "web-1.log", tmp_path / "web-2.log"]
    servers = [
        _serve(host_env(database, tmp_path / f"web-{n}"), port, log)
        for n, (port, log) in enumerate(zip(ports, logs, strict=True), 1)
    ]
    try:
        first, second = (f"http://127.0.0.1:{port}" for port in ports)
        for url, server, log in zip((first, second), servers, logs, strict=True):
            _wait_for(url + "/accounts/login/", server, log)
        cookies = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies), NoRedirect)

        page = browser.open(first + "/accounts/login/", timeout=30).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        form = {"username": "admin", "password": "two-hosts-one-login", "csrfmiddlewaretoken": token}
        with pytest.raises(urllib.error.HTTPError) as signed_in:  # 302: NoRedirect lets it through as an error
            browser.open(first + "/accounts/login/", urllib.parse.urlencode(form).encode(), timeout=30)
        assert signed_in.value.code == 302 and signed_in.value.headers["Location"] == "/"
        assert {cookie.name for cookie in cookies} >= {"sessionid", "csrftoken"}

        stats = browser.open(second + "/api/stats/", timeout=30)
        assert stats.status == 200

        # A POST on the second host with the first host's CSRF cookie: signing out is accepted.
        csrf = next(cookie.value for cookie in cookies if cookie.name == "csrftoken")
        sign_out = urllib.request.Request(second + "/accounts/logout/", data=b"", headers={"X-CSRFToken": csrf})
        with pytest.raises(urllib.error.HTTPError) as signed_out:
            browser.open(sign_out, timeout=30)
        assert signed_out.value.code == 302, signed_out.value.read()[:500]
        with pytest.raises(urllib.error.HTTPError) as refused:
            browser.open(first + "/api/stats/", timeout=30)
        assert refused.value.code in (401, 403)
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=30)
