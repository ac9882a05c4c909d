"""Untrusted input through the API: every bad value is a 4xx naming its field, and nothing is half-written.

Bodies are sent as raw JSON text, as an agent would: "\\udfff" (a lone surrogate) and "\\u0000"
(a NUL) are valid JSON escapes that no stored text can hold.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from api import serializers
from memoryui.models import Memory, MemoryEvent, Message, Transcript
from memoryui.untrusted import MAX_JSON_DEPTH
from searchindex import tasks

pytestmark = pytest.mark.django_db

LIST = "/api/memories/"
TRANSCRIPTS = "/api/transcripts/"
VALID = {"scope": "agent:main", "kind": "fact", "text": "The user runs 1000 RTX 4070s in an IDC."}
SURROGATE, NUL = "\\udfff", "\\u0000"  # as written in the JSON text
TOOL_CALL = '{"role": "assistant", "content": "", "tool_calls": [%s]}'


@pytest.fixture
def api(alice) -> Client:
    """alice's session, answering 500s as a server would instead of raising them into the test."""
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    return body["error"]


def body_with(escaped: str, **fields) -> str:
    """The VALID memory as JSON text, with `escaped` (raw JSON) as the value of each field in `fields`."""
    text = json.dumps({**VALID, **dict.fromkeys(fields, "PLACEHOLDER")})
    for name, template in fields.items():
        text = text.replace(f'"{name}": "PLACEHOLDER"', f'"{name}": {template.format(escaped)}', 1)
    return text


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def nothing_written() -> bool:
    return not Memory.objects.exists() and not MemoryEvent.objects.exists()


# --- strings no text can store -----------------------------------------------------------


@pytest.mark.parametrize("escaped", [SURROGATE, NUL])
@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"metadata": '{{"k": "{}"}}'}, "metadata.k"),
        ({"metadata": '{{"tags": ["ok", "x{}"]}}'}, "metadata.tags[1]"),
        ({"text": '"Lucky numbers {}"'}, "text"),
        ({"entity_key": '"phone:186{}"'}, "entity_key"),
    ],
)
def test_an_unstorable_string_on_create_is_a_400_naming_its_path_and_nothing_is_saved(api, escaped, fields, named):
    error = error_of(api.post(LIST, body_with(escaped, **fields), "application/json"), 400)

    assert error["code"] == "invalid"
    assert list(error["details"]) == [named]
    reason = error["details"][named][0]
    assert ("lone UTF-16 surrogate (U+DFFF)" if escaped == SURROGATE else "NUL character") in reason
    assert error["message"].startswith(f"Invalid input: {named} holds a ")
    assert nothing_written()


def test_a_surrogate_in_a_metadata_key_names_the_object_holding_it(api):
    body = json.dumps(VALID)[:-1] + ', "metadata": {"ok": {"\\ud800": 1}}}'
    error = error_of(api.post(LIST, body, "application/json"), 400)
    assert list(error["details"]) == ["metadata.ok"]
    assert "has a key that holds a lone UTF-16 surrogate (U+D800)" in error["details"]["metadata.ok"][0]
    assert nothing_written()


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ('{"text": "Prefers tea\\udfff."}', "text"),
        ('{"metadata": {"k": "\\udfff"}}', "metadata.k"),
        ('{"entity_key": "name:Lin\\u0000"}', "entity_key"),
    ],
)
def test_an_unstorable_string_on_patch_is_a_400_and_the_memory_is_unchanged(api, make_memory, body, named):
    memory = make_memory("Prefers tea.", metadata={"k": "v"})
    events = memory.events.count()

    error = error_of(api.patch(f"{LIST}{memory.pk}/", body, "application/json"), 400)

    assert list(error["details"]) == [named]
    memory.refresh_from_db()
    assert (memory.text, memory.metadata, memory.entity_key) == ("Prefers tea.", {"k": "v"}, None)
    assert memory.events.count() == events


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ('{"role": "user", "content": "hi \\udfff"}', "messages[0].content"),
        ('{"role": "user", "content": "hi", "channel": "chat\\u0000"}', "messages[0].channel"),
        (TOOL_CALL % '{"id": "c1", "name": "web\\udfff", "arguments": "{}"}', "messages[0].tool_calls[0].name"),
        (
            TOOL_CALL % '{"id": "c1", "name": "web", "arguments": {"q": "\\ud83d"}}',
            "messages[0].tool_calls[0].arguments.q",
        ),
    ],
)
def test_an_unstorable_string_in_a_transcript_names_the_message_and_nothing_is_stored(api, message, named):
    body = '{"scope": "agent:main", "messages": [' + message + "]}"

    error = error_of(api.post(TRANSCRIPTS, body, "application/json"), 400)

    assert list(error["details"]) == [named]
    assert not Transcript.objects.exists() and not Message.objects.exists()


# --- nesting -----------------------------------------------------------------------------


def test_a_body_nested_thousands_of_levels_deep_is_a_400_not_a_crash(api):
    body = '{"metadata": ' + '{"a": ' * 5000 + "{}" + "}" * 5000 + "}"

    error = error_of(api.post(LIST, body, "application/json"), 400)

    assert error["details"] == {"body": [f"is nested more than {MAX_JSON_DEPTH} levels deep"]}
    assert "nested more than 32 levels" in error["message"]
    assert nothing_written()


def test_metadata_nested_just_past_the_limit_is_refused_and_just_within_it_accepted(api):
    # The body is one level, so metadata may nest MAX_JSON_DEPTH - 1 levels.
    deep = {**VALID, "metadata": nested(MAX_JSON_DEPTH)}
    error = error_of(api.post(LIST, json.dumps(deep), "application/json"), 400)
    (path,) = error["details"]
    assert path.startswith("metadata.a.a") and "nested more than 32 levels" in error["details"][path][0]
    assert nothing_written()

    within = {**VALID, "metadata": nested(MAX_JSON_DEPTH - 1)}
    assert api.post(LIST, json.dumps(within), "application/json").status_code == 201


# --- too large -----------------------------------------------------------------------------


def test_a_body_over_the_upload_limit_is_a_413_with_the_json_error_shape(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000

    error = error_of(api.post(LIST, json.dumps({**VALID, "text": "x" * 2000}), "application/json"), 413)

    assert error["code"] == "too_large"
    assert "1,000 bytes" in error["message"]
    assert list(error["details"]) == ["body"]
    assert nothing_written()


def test_the_upload_limit_is_set_explicitly_above_djangos_default(settings):
    # A whole transcript posted at once can be larger than Django's 2.5 MB default.
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 10 * 1024 * 1024


# --- values out of range or of the wrong type ------------------------------------------------


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_an_expiry_that_has_no_utc_year_is_a_400_naming_expires_at(api, value):
    error = error_of(api.post(LIST, json.dumps({**VALID, "expires_at": value}), "application/json"), 400)
    assert list(error["details"]) == ["expires_at"]
    assert "out of range" in error["details"]["expires_at"][0]
    assert nothing_written()


def test_a_message_time_that_has_no_utc_year_is_a_400_naming_the_message(api):
    body = {"scope": "main", "messages": [{"role": "user", "content": "hi", "created_at": "0001-01-01T00:00+14:00"}]}
    error = error_of(api.post(TRANSCRIPTS, json.dumps(body), "application/json"), 400)
    assert list(error["details"]) == ["messages[0].created_at"]
    assert not Transcript.objects.exists()


def test_a_number_is_not_a_scope(api):
    error = error_of(api.post(LIST, json.dumps({**VALID, "scope": 123}), "application/json"), 400)
    assert error["details"] == {"scope": ["scope must be a string, got int"]}
    transcript = {"scope": 123, "messages": [{"role": "user", "content": "hi"}]}
    error = error_of(api.post(TRANSCRIPTS, json.dumps(transcript), "application/json"), 400)
    assert list(error["details"]) == ["scope"]
    assert nothing_written() and not Transcript.objects.exists()


@pytest.mark.parametrize(
    "field", ["text", "scope", "kind", "tier", "importance", "confidence", "pinned", "source", "metadata"]
)
def test_null_for_a_field_that_has_no_null_is_a_400_on_patch(api, make_memory, field):
    memory = make_memory("Prefers tea.")
    before = memory.snapshot()

    error = error_of(api.patch(f"{LIST}{memory.pk}/", json.dumps({field: None}), "application/json"), 400)

    assert error["details"] == {field: ["may not be null; leave it out instead"]}
    memory.refresh_from_db()
    assert memory.snapshot() == before


def test_null_removes_an_entity_key_and_an_expiry(api, make_memory):
    memory = make_memory("My phone is 18600000000.", kind="entity", entity_key="phone:18600000000")
    body = {"entity_key": None, "expires_at": None}
    response = api.patch(f"{LIST}{memory.pk}/", json.dumps(body), "application/json")
    assert response.status_code == 200, response.content
    assert response.json()["entity_key"] is None


def test_null_for_a_required_field_on_create_is_named_once(api):
    error = error_of(api.post(LIST, json.dumps({**VALID, "text": None}), "application/json"), 400)
    assert error["details"] == {"text": ["may not be null; leave it out instead"]}


@pytest.mark.parametrize("text", ["\u200b\u200c\u200d", "\u202e\ufeff", "\x01\x02\x03"])
def test_memory_text_of_only_invisible_characters_is_refused(api, make_memory, text):
    error = error_of(api.post(LIST, json.dumps({**VALID, "text": text}), "application/json"), 400)
    assert list(error["details"]) == ["text"] and "must hold visible text" in error["details"]["text"][0]
    assert nothing_written()
    memory = make_memory("Prefers tea.")
    error = error_of(api.patch(f"{LIST}{memory.pk}/", json.dumps({"text": text}), "application/json"), 400)
    assert list(error["details"]) == ["text"]


def test_a_transcript_message_may_look_empty(api):
    # Only memory text must be visible: a transcript keeps what was said, as it was said.
    body = {"scope": "main", "messages": [{"role": "user", "content": "\u200b"}]}
    assert api.post(TRANSCRIPTS, json.dumps(body), "application/json").status_code == 201


def tool_call_message(name: str, call_id: str = "c1") -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "name": name, "arguments": "{}"}]}


def test_a_tool_call_name_or_id_longer_than_200_characters_is_named(api):
    messages = [tool_call_message("x" * 10_000), tool_call_message("web", call_id="c" * 201)]
    error = error_of(
        api.post(TRANSCRIPTS, json.dumps({"scope": "main", "messages": messages}), "application/json"), 400
    )
    assert error["details"] == {
        "messages[0].tool_calls[0].name": ["is 10000 characters; at most 200"],
        "messages[1].tool_calls[0].id": ["is 201 characters; at most 200"],
    }
    assert not Transcript.objects.exists()
    ok = {"scope": "main", "messages": [tool_call_message("x" * 200)]}
    assert api.post(TRANSCRIPTS, json.dumps(ok), "application/json").status_code == 201


def test_an_unknown_field_of_an_extraction_request_is_refused(api):
    posted = api.post(
        TRANSCRIPTS, json.dumps({"scope": "main", "messages": [{"role": "user", "content": "hi"}]}), "application/json"
    )
    url = f"{TRANSCRIPTS}{posted.json()['transcript_id']}/extract/"
    error = error_of(api.post(url, json.dumps({"dryrun": True}), "application/json"), 400)
    assert error["details"] == {"dryrun": ["is not an accepted field"]}


# --- search and pages --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "says"),
    [("", "empty"), ("   ", "empty"), ("\x00", "NUL"), ("ab\x00c", "NUL"), ("\u200b\u200b", "nothing visible")],
)
def test_a_search_query_that_cannot_be_searched_is_a_400_naming_q(api, q, says):
    error = error_of(api.get("/api/search/", {"q": q}), 400)
    assert list(error["details"]) == ["q"] and says in error["details"]["q"][0]


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"page": "-1"}, "page"),
        ({"page": "0"}, "page"),
        ({"page": "two"}, "page"),
        ({"page_size": "0"}, "page_size"),
        ({"page_size": "many"}, "page_size"),
    ],
)
def test_a_bad_page_or_page_size_is_a_400_naming_it(api, make_memory, params, named):
    make_memory()
    error = error_of(api.get(LIST, params), 400)
    assert list(error["details"]) == [named]


def test_a_page_past_the_last_is_a_404_saying_how_many_there_are(api, make_memory):
    make_memory()
    error = error_of(api.get(LIST, {"page": "3"}), 404)
    assert error["message"] == "Invalid page: page 3 is past the last page (1 page)."
    assert api.get(LIST, {"page": "last"}).status_code == 200


# --- one transaction per write ------------------------------------------------------------------


def test_a_create_that_fails_after_the_write_leaves_nothing(api, monkeypatch, django_capture_on_commit_callbacks):
    def fail(self, instance):
        raise RuntimeError("answer could not be built")

    monkeypatch.setattr(serializers.MemoryWriteResultSerializer, "to_representation", fail)
    with django_capture_on_commit_callbacks() as callbacks:
        response = api.post(LIST, json.dumps(VALID), "application/json")

    assert error_of(response, 500)["code"] == "server_error"
    assert nothing_written()
    assert callbacks == []  # no index sync announced for a write that was undone


def test_a_create_whose_answer_cannot_be_rendered_leaves_nothing(api, monkeypatch):
    def fail(self, data, accepted_media_type=None, renderer_context=None):
        raise UnicodeEncodeError("utf-8", "\udfff", 0, 1, "surrogates not allowed")

    monkeypatch.setattr("api.renderers.JSONRenderer.render", fail)
    response = api.post(LIST, json.dumps(VALID), "application/json")

    assert response.status_code == 500
    assert nothing_written()


def test_an_edit_that_fails_after_the_write_is_undone(api, make_memory, monkeypatch):
    memory = make_memory("Prefers tea.")

    def fail(self, instance):
        raise RuntimeError("answer could not be built")

    monkeypatch.setattr(serializers.MemorySerializer, "to_representation", fail)
    response = api.patch(f"{LIST}{memory.pk}/", json.dumps({"text": "Prefers coffee."}), "application/json")

    assert response.status_code == 500
    memory.refresh_from_db()
    assert memory.text == "Prefers tea." and memory.events.count() == 1


def test_a_successful_write_still_announces_its_index_sync_after_commit(api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        assert api.post(LIST, json.dumps(VALID), "application/json").status_code == 201
    assert len(callbacks) == 1 and Memory.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_with_real_commits_only_the_kept_write_reaches_the_index_queue(api, monkeypatch):
    # The request's own transaction is the outermost here, as in production: on_commit runs on
    # its commit (index sync queued) and never after its rollback.
    sent: list[list[str]] = []
    monkeypatch.setattr(tasks.sync_index, "delay", lambda ids: sent.append(list(ids)))

    kept = api.post(LIST, json.dumps(VALID), "application/json")
    assert kept.status_code == 201 and sent == [[kept.json()["id"]]]

    monkeypatch.setattr(serializers.MemoryWriteResultSerializer, "to_representation", lambda self, instance: 1 / 0)
    failed = api.post(LIST, json.dumps({**VALID, "text": "The user prefers tea."}), "application/json")
    assert failed.status_code == 500
    assert len(sent) == 1 and Memory.objects.count() == 1
