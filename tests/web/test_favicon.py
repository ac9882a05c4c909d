"""The icon: every page links it, and /favicon.ico, which browsers ask for whatever a page links,
leads to it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_pages_link_the_icon_and_favicon_ico_leads_to_it(alice_client, client):
    page = alice_client.get("/").content.decode()
    assert '<link rel="icon" href="/static/memoryui/favicon.svg" type="image/svg+xml">' in page
    assert 'href="/static/memoryui/favicon.svg"' in client.get("/accounts/login/").content.decode()

    asked = client.get("/favicon.ico")  # signed out too: a browser asks on the sign-in page
    assert asked.status_code == 301 and asked["Location"] == "/static/memoryui/favicon.svg"
    icon = client.get(asked["Location"])
    assert icon.status_code == 200
    assert b"<svg" in b"".join(icon.streaming_content if icon.streaming else [icon.content])
