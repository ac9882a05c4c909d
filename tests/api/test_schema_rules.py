"""The schema states the rules the API enforces (api.schema), and the API enforces what the
schema states: the same scope pattern, no key a body does not declare, strict booleans, query
strings no text can hold refused, and the answers every operation can get documented."""

from __future__ import annotations

import json
import re

import pytest

from api import schema
from ingest.ingestion import ingest
from memoryui import rules, untrusted
from recall.models import GoldenSet

pytestmark = pytest.mark.django_db


@pytest.fixture
def openapi(alice_client) -> dict:
    return alice_client.get("/api/schema/", headers={"Accept": "application/json"}).json()


def test_request_bodies_take_no_undeclared_key_and_scopes_follow_the_stores_pattern(openapi):
    components = openapi["components"]["schemas"]
    requests = {name: c for name, c in components.items() if name.endswith("Request")}
    assert {"MemoryInputRequest", "RecallRequestRequest", "TranscriptInRequest", "MessageInRequest"} <= set(requests)
    open_ones = {name for name, c in requests.items() if c.get("additionalProperties") is not False}
    assert open_ones == {"ToolCallRequest"}  # a tool call's other keys are the agent's own
    scopes = [c["properties"]["scope"] for c in requests.values() if "scope" in c.get("properties", {})]
    assert len(scopes) >= 4 and all(s["pattern"] == rules.SCOPE_PATTERN for s in scopes)
    for path, operations in openapi["paths"].items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "scope":
                    declared = parameter["schema"].get("items", parameter["schema"])
                    assert declared["pattern"] == rules.SCOPE_PATTERN, path


def test_every_operation_documents_the_answers_any_request_can_get(openapi):
    operations = [op for ops in openapi["paths"].values() for op in ops.values() if "responses" in op]
    assert len(operations) >= 40
    for operation in operations:
        assert {"401", "414", "429", "503"} <= set(operation["responses"]), operation["operationId"]
        if "requestBody" in operation:
            assert {"400", "413"} <= set(operation["responses"]), operation["operationId"]


@pytest.mark.parametrize(
    ("raw", "visible"),
    [("abc", True), ("\u200b\u200b", False), ("\u3000 \t", False), ("\ue000", False), ("a\u200b", True), ("", False)],
)
def test_the_visible_text_pattern_is_the_servers_rule(raw, visible):
    assert untrusted.is_visible(raw) is visible
    assert bool(re.fullmatch(schema.VISIBLE_TEXT, raw)) is visible


@pytest.mark.parametrize(("raw", "blank"), [("  ", True), ("\u3000\x1c", True), (" x ", False), ("", True)])
def test_the_non_blank_pattern_is_what_trimming_leaves(raw, blank):
    assert (not raw.strip()) is blank
    assert (re.fullmatch(schema.NON_BLANK, raw) is None) is blank


def test_a_query_string_no_text_can_hold_is_a_400_naming_it(alice_client):
    api = alice_client.get("/api/memories/", {"kind": "note\x00"})
    assert api.status_code == 400 and api["Content-Type"] == "application/json"
    assert list(api.json()["error"]["details"]) == ["kind"]
    page = alice_client.get("/memories/", {"q": "tea\x00"})
    assert page.status_code == 400 and "q" in page.content.decode()


def _post(client, path: str, body, token: str):
    return client.post(path, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_booleans_are_json_booleans_and_bodies_are_objects(client, agent_token, make_memory):
    transcript = ingest({"scope": "main", "messages": [{"role": "user", "content": "I deploy on Fridays."}]})
    dry = _post(client, f"/api/transcripts/{transcript.transcript.pk}/extract/", {"dry_run": 0}, agent_token)
    assert dry.status_code == 400 and "must be true or false" in dry.json()["error"]["details"]["dry_run"][0]
    memory = make_memory()
    memory.tombstone("test", actor="test")
    restore = _post(client, f"/api/memories/{memory.pk}/restore/", [], agent_token)
    assert restore.status_code == 400 and restore.json()["error"]["code"] == "invalid"
    golden = GoldenSet.objects.create(name="g", scope="agent:main")
    run = _post(client, f"/api/recall/golden/{golden.pk}/run/", None, agent_token)
    assert run.status_code == 400
    flag = client.post(
        "/api/transcripts/?extract=maybe",
        json.dumps({"scope": "main", "messages": [{"role": "user", "content": "hi there"}]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {agent_token}",
    )
    assert flag.status_code == 400 and "extract" in flag.json()["error"]["details"]


def test_an_ordering_left_empty_is_none_and_a_dangling_comma_is_a_400(alice_client, make_memory):
    make_memory()
    assert alice_client.get("/api/memories/", {"ordering": ""}).status_code == 200
    assert alice_client.get("/api/memories/", {"ordering": "-created_at,kind"}).status_code == 200
    dangling = alice_client.get("/api/memories/", {"ordering": "created_at,"})
    assert dangling.status_code == 400 and list(dangling.json()["error"]["details"]) == ["ordering"]
    assert re.fullmatch(openapi_ordering(alice_client), "-created_at,kind")


def openapi_ordering(client) -> str:
    document = client.get("/api/schema/", headers={"Accept": "application/json"}).json()
    parameters = document["paths"]["/api/memories/"]["get"]["parameters"]
    return next(p["schema"]["pattern"] for p in parameters if p["name"] == "ordering")
