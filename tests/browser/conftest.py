"""Browser tests: Playwright driving Debian's /usr/bin/chromium against pytest-django's live_server.

Playwright's own browser download is never used (never run `playwright install`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

# live_server + the sync Playwright API: Django's async-safety check would refuse DB access.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": "/usr/bin/chromium",
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}}


@pytest.fixture(autouse=True)
def _screenshot(request, page):
    """Keep a screenshot of where each test ended, for a human to look at."""
    yield
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"), full_page=True)


@pytest.fixture
def screenshot(request, page):
    """Save a screenshot of the page as it is now: `screenshot("unauthorized")`."""

    def take(label: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{request.node.name}-{label}.png"), full_page=True)

    return take


# Chromium logs each refusal ("Refused to execute inline script because it violates the following
# Content Security Policy directive…"); the listener below reports the event as well, in case a
# refusal is not logged.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  const blocked = event.blockedURI || "inline";
  console.error(`Content Security Policy violation: ${event.violatedDirective} blocked ${blocked}`);
}, true);
"""


@pytest.fixture
def csp_violations(page) -> list[str]:
    """What the browser refused under the Content-Security-Policy so far, as it reported it."""
    refused: list[str] = []
    page.add_init_script(REPORT_VIOLATIONS)
    page.on(
        "console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None
    )
    return refused


@pytest.fixture(autouse=True)
def _no_csp_violations(csp_violations):
    """Every browser test fails on a CSP violation: the pages must work under the policy as served."""
    yield
    assert csp_violations == [], "the browser refused something under the Content-Security-Policy"


@pytest.fixture
def signed_in(page, live_server, transactional_db, alice):
    """The page, signed in as alice: her session cookie from Client.force_login."""
    client = Client()
    client.force_login(alice)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}])
    page.set_default_timeout(5000)
    return page
