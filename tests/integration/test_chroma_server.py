"""The vector index on a real chromadb server (`chroma run`, CHROMA_URL): memories written through
the write path are found by search and by semantic dedup, verify and repair see the server's
contents, and a server that goes down degrades search (the vector index named) until it is back
and a repair has brought it in step again.
"""

from __future__ import annotations

import io
import json
from contextlib import contextmanager

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings
from django.core.management import CommandError, call_command

from memoryui.models import IndexOutbox, Memory, MemoryEvent
from searchindex import health, outbox
from searchindex import indexes as search_indexes
from searchindex.documents import IndexUnavailable
from searchindex.search import search
from tests.integration.chroma_server import ChromaServer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db]

STORE = [
    ("The user's phone number is 18600000000.", {"kind": "entity", "entity_key": "phone:18600000000"}),
    ("Releases go out on Thursdays after 14:00; nothing ships on Fridays.", {"kind": "procedure"}),
    ("Prefers concise answers: get to the point and do not summarize at the end.", {"kind": "preference"}),
    ("Staging runs on k3s with three nodes.", {"kind": "fact"}),
]


@pytest.fixture
def store(server_indexes, write) -> dict[str, Memory]:
    return {text: write(text, **fields) for text, fields in STORE}


@contextmanager
def server_client(server: ChromaServer):
    """A chromadb client of the test's own on the server, to look at (or damage) its contents."""
    client = chromadb.HttpClient(
        host="127.0.0.1", port=server.port, settings=ChromaSettings(anonymized_telemetry=False)
    )
    try:
        yield client
    finally:
        client.close()


def ids_on_the_server(server: ChromaServer) -> set[str]:
    with server_client(server) as client:
        return {pk for collection in client.list_collections() for pk in collection.get(include=[])["ids"]}


def delete_on_the_server(server: ChromaServer, pk: str) -> None:
    with server_client(server) as client:
        for collection in client.list_collections():
            collection.delete(ids=[pk])


def run_search(*args) -> tuple[dict, int]:
    out = io.StringIO()
    try:
        call_command("search", *args, "--json", stdout=out)
        status = 0
    except CommandError:
        status = 1
    return json.loads(out.getvalue()), status


def test_memories_written_through_the_write_path_are_on_the_server_and_found_by_search(store, server_indexes):
    assert ids_on_the_server(server_indexes) == {str(memory.pk) for memory in store.values()}
    info = search_indexes.get_index("vector").info()
    assert info["backend"] == "chromadb server" and info["url"] == server_indexes.url and info["count"] == 4

    releases = store["Releases go out on Thursdays after 14:00; nothing ships on Fridays."]
    for retriever in ("hybrid", "vector"):
        result = search("which day do we ship a release", scopes=["agent:main"], retriever=retriever, floor=False)
        assert result.degraded == {}
        assert result.candidates[0].memory.pk == releases.pk and result.candidates[0].candidate.vector_rank == 1
    phone = search("18600000000", scopes=["agent:main"])
    assert phone.results[0].memory.pk == store["The user's phone number is 18600000000."].pk


def test_a_reworded_memory_merges_into_its_neighbour_found_on_the_server(server_indexes, write):
    first = write("Deploys go out on Fridays after the smoke tests.", kind="procedure")
    again = write("Deploys happen on Fridays, after the smoke tests pass.", kind="procedure")
    assert again.pk == first.pk and Memory.objects.count() == 1
    event = MemoryEvent.objects.get(memory=first, action="merged")
    assert event.reason.startswith("duplicate by semantic (cosine similarity 0.9")
    assert ids_on_the_server(server_indexes) == {str(first.pk)}


def test_verify_reports_an_entry_deleted_on_the_server_and_repair_puts_it_back(store, server_indexes):
    lost = str(store["Staging runs on k3s with three nodes."].pk)
    delete_on_the_server(server_indexes, lost)

    diffs = {diff.index: diff for diff in health.verify()}
    assert diffs["vector"].missing == [lost] and not diffs["vector"].error
    assert diffs["bm25"].ok

    assert health.repair()["vector"] == {"reindexed": 1, "removed": 0}
    assert all(diff.ok for diff in health.verify())
    assert lost in ids_on_the_server(server_indexes)


@pytest.mark.parametrize("outage", ["stop", "freeze"])
def test_with_the_server_down_search_degrades_to_bm25_and_names_the_vector_index(
    store, server_indexes, settings, alice_client, outage
):
    # A stopped server refuses connections; a frozen one accepts them and never answers.
    settings.MEMORYUI_CHROMA_CONNECT_TIMEOUT, settings.MEMORYUI_CHROMA_TIMEOUT = 0.5, 1.0
    search_indexes.close_indexes()  # reopened with these timeouts
    assert search("18600000000", scopes=["agent:main"]).degraded == {}  # connected before the outage
    getattr(server_indexes, outage)()
    try:
        result = search("18600000000", scopes=["agent:main"])
        assert result.results[0].memory.text == "The user's phone number is 18600000000."
        assert server_indexes.url in result.degraded["vector"]
        assert result.degraded["vector"].startswith("vector index unavailable")
        if outage == "freeze":  # the message says which limit ran out
            assert "no answer within 1 s (MEMORYUI_CHROMA_TIMEOUT)" in result.degraded["vector"]

        response = alice_client.get("/api/search/", {"q": "18600000000", "scope": "agent:main"})
        assert response.status_code == 200 and server_indexes.url in response.json()["degraded"]["vector"]
        down = alice_client.get("/api/search/", {"q": "18600000000", "scope": "agent:main", "retriever": "vector"})
        assert down.status_code == 503
        assert down.json()["error"]["details"]["backend"] == "vector index"

        document, status = run_search("18600000000", "--scope", "agent:main", "--retriever", "vector")
        assert status == 1 and document["error"].startswith("vector index unavailable")
        assert server_indexes.url in document["error"]
    finally:
        server_indexes.thaw()


def test_after_an_outage_a_restart_and_a_repair_bring_the_server_back_in_step(
    store, server_indexes, make_memory, django_capture_on_commit_callbacks
):
    server_indexes.kill()
    written = make_memory("Escalate ata outages to the on-call lead.", kind="procedure")
    created = MemoryEvent.objects.get(memory=written, action="created")
    assert created.reason.startswith("semantic dedup skipped: vector index unavailable")
    with pytest.raises(IndexUnavailable, match=server_indexes.url):
        outbox.sync_memories([str(written.pk)])  # what the after-commit sync does, and fails
    tombstoned = store["Staging runs on k3s with three nodes."]
    with django_capture_on_commit_callbacks(execute=False):  # its sync would fail the same way
        tombstoned.tombstone("decommissioned", actor="test")
    diffs = {diff.index: diff for diff in health.verify()}
    assert server_indexes.url in diffs["vector"].error

    server_indexes.restart()  # same port and data: the process's index reconnects by itself
    diffs = {diff.index: diff for diff in health.verify()}
    assert diffs["vector"].missing == [str(written.pk)] and diffs["vector"].orphaned == [str(tombstoned.pk)]
    health.repair()
    assert all(diff.ok for diff in health.verify())
    assert not IndexOutbox.objects.exists()
    expected = {str(memory.pk) for memory in Memory.objects.active()}
    assert ids_on_the_server(server_indexes) == expected and str(written.pk) in expected
    found = search("who do I escalate an ata outage to", scopes=["agent:main"], retriever="vector", floor=False)
    assert found.degraded == {} and found.candidates[0].memory.pk == written.pk
