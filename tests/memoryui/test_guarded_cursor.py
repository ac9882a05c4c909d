"""A crafted MCP `list_memories` cursor is an invalid `cursor`, never a server error, and the
REST API's page numbers (its only pagination: there is no cursor) refuse or clamp what they
cannot serve.

Who is who: the local stdio caller (no token) lists agent:main; alice's session uses the API.
"""

from __future__ import annotations

import base64
import uuid
import warnings

import pytest
from rest_framework import exceptions

from mcpserver import tools
from mcpserver.server import InvalidInput, mcp_error

pytestmark = pytest.mark.django_db

LOCAL = tools.Caller(scope="agent:main")


def cursor(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "when",
    [
        "0001-01-01T00:00:00+14:00",  # before year 1 in UTC: no datetime holds it (an OverflowError)
        "9999-12-31T23:59:59-14:00",  # after year 9999 in UTC
        "2026-11-25T09:00:00",  # no time zone: it would be read in the server's, with a warning
        "2026-11-25T09:00:00+01:00",  # a zone the server never writes
    ],
)
def test_a_cursor_whose_time_is_not_in_utc_is_an_invalid_cursor(make_memory, when):
    make_memory("Fact about the build farm.", kind="fact")
    crafted = cursor(f"{when}|{uuid.uuid4()}")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Django's naive-datetime warning would be one
        with pytest.raises(exceptions.ValidationError) as refused:
            tools.list_memories(LOCAL, cursor=crafted)

    assert set(refused.value.detail) == {"cursor"}
    error = mcp_error(refused.value)
    assert isinstance(error, InvalidInput) and set(error.problems) == {"cursor"}


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59.999999+00:00"])
def test_a_cursor_at_the_ends_of_the_calendar_in_utc_pages_as_any_other(make_memory, when):
    make_memory("Fact about the build farm.", kind="fact")

    page = tools.list_memories(LOCAL, cursor=cursor(f"{when}|{uuid.uuid4()}"))

    assert page["next_cursor"] is None
    assert len(page["memories"]) == (0 if when.startswith("0001") else 1)


def test_the_cursors_the_server_gives_still_page_through_everything(make_memory):
    for n in range(5):
        make_memory(f"Fact number {n} about the build farm.", kind="fact")
    seen, page = [], tools.list_memories(LOCAL, limit=2)
    while True:
        seen += [item["text"] for item in page["memories"]]
        if not page["next_cursor"]:
            break
        page = tools.list_memories(LOCAL, limit=2, cursor=page["next_cursor"])
    assert sorted(seen) == sorted(f"Fact number {n} about the build farm." for n in range(5))


@pytest.mark.parametrize(
    ("query", "status", "field"),
    [
        ("page=99999999999999999999999", 404, None),
        ("page=-1", 400, "page"),
        ("page=1e3", 400, "page"),
        ("page_size=0", 400, "page_size"),
        ("page_size=99999999999999999999999", 200, None),
    ],
)
def test_the_rest_apis_page_numbers_refuse_or_clamp_what_they_cannot_serve(
    alice_client, make_memory, query, status, field
):
    make_memory()

    response = alice_client.get(f"/api/memories/?{query}")

    assert response.status_code == status, response.content
    if field:
        assert list(response.json()["error"]["details"]) == [field]
