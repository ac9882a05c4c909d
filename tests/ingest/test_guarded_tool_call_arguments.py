"""A tool call's `arguments` is refused at the door when no export could write it back, and every
transcript that is accepted can be exported in every format: the API's `?as=` (projected or
not), the page's downloads and `export_transcript`.

Who is who: alice's session posts and reads over the API (a superuser, every scope); bob, a
viewer, downloads from the transcript's page; erin, an editor, posts on the page.
"""

from __future__ import annotations

import io
import json
import random

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from ingest import sessionlogs
from ingest.ingestion import TranscriptError, clean_transcript
from ingest.transcripts import Msg, ToolCall
from memoryui.models import Message, Transcript

pytestmark = pytest.mark.django_db

TRANSCRIPTS = "/api/transcripts/"
DEEP = "[" * 2_000 + "]" * 2_000
FIELD = "messages[1].tool_calls[0].arguments"


def transcript(arguments, *, id: str = "session-1") -> dict:
    return {
        "id": id,
        "scope": "agent:main",
        "messages": [
            {"role": "user", "content": "List Friday's deploys."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "calendar", "arguments": arguments}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "2 deploys on Friday"},
            {"role": "assistant", "content": "There are 2 deploys on Friday."},
        ],
    }


@pytest.fixture
def api(alice) -> Client:
    """alice's session, answering 500s as a server would instead of raising them into the test."""
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


def post(api, body: dict):
    return api.post(TRANSCRIPTS, json.dumps(body), "application/json")


def strict_json(value) -> bytes:
    """`value` as a JSON client reads it: no NaN, no Infinity, UTF-8 (no lone surrogate)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")


# --- refused at the door -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (DEEP, "holds JSON that is nested more than 32 levels deep (at $" + "[0]" * 32 + ")"),
        ("[" * 33 + "]" * 33, "holds JSON that is nested more than 32 levels deep"),
        ('{"path": "\\udfff"}', "holds JSON that cannot be stored: $.path: holds a lone UTF-16 surrogate (U+DFFF)"),
        ('{"\\u0000": 1}', "holds JSON that cannot be stored: $: has a key that holds a NUL character"),
    ],
)
def test_arguments_no_export_could_write_are_a_400_naming_the_field_and_nothing_is_stored(api, arguments, says):
    response = post(api, transcript(arguments))

    assert response.status_code == 400, response.content
    details = response.json()["error"]["details"]
    assert list(details) == [FIELD]
    assert details[FIELD][0].startswith(says)
    assert not Transcript.objects.exists() and not Message.objects.exists()


def test_the_page_and_ingest_transcript_refuse_them_too(erin_client, tmp_path):
    body = json.dumps(transcript(DEEP))

    page = erin_client.post("/transcripts/", {"transcript": body})
    assert page.status_code == 400 and f"{FIELD}: holds JSON that is nested" in page.content.decode()

    path = tmp_path / "t.json"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(CommandError, match=r"messages\[1\]\.tool_calls\[0\]\.arguments: holds JSON that is nested"):
        call_command("ingest_transcript", str(path), stdout=io.StringIO())
    assert not Transcript.objects.exists()


def test_json_nested_to_the_limit_is_accepted_and_written_back_as_its_value(api):
    arguments = "[" * 32 + "]" * 32

    assert post(api, transcript(arguments)).status_code == 201
    stored = Transcript.objects.get()
    response = api.get(f"{TRANSCRIPTS}{stored.pk}/", {"as": "gemini"})

    call = response.json()["messages"][1]["parts"][0]["functionCall"]
    assert call["args"] == {"input": json.loads(arguments)}


# --- everything accepted exports in every format ---------------------------------------------------

ODD_BUT_ACCEPTED = [
    "",
    "ls -la /srv",
    '{"day": "friday"}',
    '"just a JSON string"',
    "[1, 2, 3]",
    "42",
    "NaN",  # not JSON: kept and written as text
    '{"x": Infinity}',
    "1e999",
    "9" * 5000,  # an integer of more digits than Python converts
    '{"broken": ',
    "[" * 20 + " not JSON",
    '{"emoji": "\\ud83d\\ude00"}',  # a surrogate pair is one character
    '{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}',
]


def every_export(api, bob_client, pk) -> None:
    for fmt in sessionlogs.FORMATS:
        for projected in ("true", "false"):
            response = api.get(f"{TRANSCRIPTS}{pk}/", {"as": fmt, "projected": projected})
            assert response.status_code == 200, (fmt, projected, response.content[:300])
        download = bob_client.get(f"/transcripts/{pk}/download/", {"as": fmt})
        assert download.status_code == 200, (fmt, download.content[:300])
        for flags in ((), ("--projected",)):
            out = io.StringIO()
            call_command("export_transcript", str(pk), "--format", fmt, *flags, stdout=out, stderr=io.StringIO())
            assert out.getvalue().strip()


@pytest.mark.parametrize("arguments", ODD_BUT_ACCEPTED)
def test_arguments_that_are_accepted_export_in_every_format(api, bob_client, arguments):
    response = post(api, transcript(arguments))
    assert response.status_code == 201, response.content

    every_export(api, bob_client, Transcript.objects.get().pk)


def test_a_call_stored_before_the_door_checked_it_still_exports_in_every_format(api, bob_client):
    post(api, transcript("{}"))
    stored = Transcript.objects.get()
    # As a row stored before the check: its arguments are written back as the text they are.
    Message.objects.filter(transcript=stored, index=1).update(
        tool_calls=[{"id": "c1", "name": "calendar", "arguments": DEEP}]
    )

    every_export(api, bob_client, stored.pk)
    gemini = api.get(f"{TRANSCRIPTS}{stored.pk}/", {"as": "gemini"}).json()["messages"]
    assert gemini[1]["parts"][0]["functionCall"]["args"] == {"input": DEEP}


def random_arguments(rng: random.Random) -> str:
    """Arguments text from pieces that have broken readers: brackets, escapes, numbers, keywords."""
    pieces = ['{"a": ', "[", "]", "}", '"', "\\", "\\u0000", "\\udfff", "\\ud83d\\ude00", "NaN", "-Infinity", "1e999"]
    pieces += ["0", "-1.5e3", "true", "null", ", ", ": ", "é", "\x00", "\n", "x", '{"k": [1, {"m": "v"}]}']
    text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
    if rng.random() < 0.3:
        depth = rng.choice([1, 31, 32, 33, 200])
        text = "[" * depth + text + "]" * depth
    return text


def test_whatever_arguments_the_rules_accept_every_format_writes_as_strict_json():
    rng = random.Random(20261125)
    accepted = refused = 0
    for _ in range(600):
        arguments = random_arguments(rng)
        try:
            clean = clean_transcript(transcript(arguments))
        except TranscriptError as exc:
            assert set(exc.errors) <= {FIELD, "messages[1].tool_calls[0]"}, exc.errors
            refused += 1
            continue
        accepted += 1
        messages = [Msg.from_dict(index, message) for index, message in enumerate(clean["messages"])]
        assert messages[1].tool_calls == (ToolCall(id="c1", name="calendar", arguments=arguments),)
        for fmt in sessionlogs.FORMATS:
            items = sessionlogs.write(messages, fmt, transcript={"id": "s", "scope": "agent:main", "metadata": {}})
            strict_json(items)
            assert sessionlogs.dumps(items, fmt).encode("utf-8")
    assert accepted > 100 and refused > 10  # both sides of the door were tried
