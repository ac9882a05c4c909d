"""The Duplicates page, the Clean-up wizard and undo, through the Django test client."""

from __future__ import annotations

import pytest

from memoryui import demo, jsonl
from memoryui.models import DistinctPair, Memory, MemoryEvent, TaskRun

pytestmark = pytest.mark.django_db


def _restore(text: str, **fields) -> Memory:
    memory = jsonl.new_memory(jsonl.parse_record({"scope": "agent:main", "kind": "note", "text": text, **fields}))
    jsonl.insert_memories([memory], actor="test")
    return Memory.objects.get(pk=memory.pk)


@pytest.fixture
def twins():
    return _restore("Prefers tabs.", kind="preference"), _restore("prefers  TABS.")


def test_the_duplicates_page_shows_each_cluster_with_its_proposed_canonical(alice_client, twins):
    keep, other = twins
    page = alice_client.get("/duplicates/?scope=agent:main").content.decode()

    assert 'data-layer="exact"' in page
    assert f'value="{keep.pk}" aria-label="keep this one" checked' in page
    assert f'name="member" value="{other.pk}"' in page
    assert "merging them all would tombstone <b>1</b>" in page


def test_the_htmx_request_gets_only_the_clusters(alice_client, twins):
    response = alice_client.get("/duplicates/?scope=agent:main", headers={"HX-Request": "true"})
    body = response.content.decode()
    assert 'data-layer="exact"' in body
    assert "<html" not in body and 'id="replay"' not in body


def test_replaying_a_threshold_labels_the_changes_and_changes_nothing(alice_client, twins, settings):
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = 0.999
    events = MemoryEvent.objects.count()

    page = alice_client.get("/duplicates/?scope=agent:main&threshold=0.95").content.decode()

    assert "Replay at <b>0.95</b> (configured 0.999), nothing changed" in page
    assert 'data-change="unchanged"' in page
    assert MemoryEvent.objects.count() == events


@pytest.mark.parametrize(
    ("query", "message"),
    [("threshold=abc", "threshold: &#x27;abc&#x27; is not a number"), ("threshold=2", "threshold: must be above 0")],
)
def test_a_bad_threshold_is_named(alice_client, twins, query, message):
    page = alice_client.get(f"/duplicates/?scope=agent:main&{query}").content.decode()
    assert message in page


def test_approving_a_merge_with_another_canonical_and_undoing_it(alice_client, twins):
    keep, other = twins
    response = alice_client.post(
        "/duplicates/merge/",
        {"scope": "agent:main", "member": [keep.pk, other.pk], "canonical": other.pk},
        follow=True,
    )
    page = response.content.decode()
    assert f"Merged 1 duplicates into {other.pk}." in page
    keep.refresh_from_db()
    assert keep.status == "tombstoned" and keep.metadata["merged_into"] == str(other.pk)
    assert 'data-action="undo-merge"' in page

    batch = alice_client.session["undo_batch"]
    page = alice_client.post(f"/batches/{batch}/undo/", {"next": "/duplicates/"}, follow=True).content.decode()
    assert "Undone: 1 restored, 1 put back, 0 tombstoned." in page
    keep.refresh_from_db()
    assert keep.status == "active"


def test_a_stale_merge_changes_nothing_and_says_why(alice_client, twins):
    keep, other = twins
    other.tombstone("gone meanwhile", actor="bob")
    page = alice_client.post(
        "/duplicates/merge/", {"scope": "agent:main", "member": [keep.pk, other.pk]}, follow=True
    ).content.decode()
    assert f"Nothing merged: cannot merge: {other.pk}: tombstoned" in page


def test_not_duplicates_is_remembered(alice_client, twins):
    page = alice_client.post(
        "/duplicates/reject/", {"scope": "agent:main", "member": [m.pk for m in twins]}, follow=True
    ).content.decode()
    assert "Marked as not duplicates (1 pairs)" in page
    assert DistinctPair.objects.count() == 1
    assert 'data-state="empty"' in page


def test_merge_all_runs_as_a_task_whose_page_offers_the_undo(alice_client, twins, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        alice_client.post("/duplicates/apply/", {"scope": "agent:main"})
    run = TaskRun.objects.get(kind="dedup")
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert (run.status, run.counts) == ("succeeded", {"clusters": 1, "merged": 1})
    assert f'action="/batches/{run.result["batch"]}/undo/"' in page


def test_memory_text_is_escaped_on_the_duplicates_page(alice_client):
    _restore("<script>alert(1)</script> Prefers tabs.")
    _restore("<script>alert(1)</script>  prefers TABS.")
    page = alice_client.get("/duplicates/?scope=agent:main").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


# --- the clean-up wizard ------------------------------------------------------------------------


@pytest.fixture
def polluted(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    demo.seed_polluted()


def _step_state(page: str, step: str) -> str:
    marker = f'data-step="{step}" data-state="'
    return page.split(marker, 1)[1].split('"', 1)[0]


def test_the_wizard_previews_applies_and_undoes_each_step_in_order(
    alice_client, polluted, django_capture_on_commit_callbacks
):
    url = "/cleanup/?scope=agent:main"
    page = alice_client.get(url).content.decode()
    assert _step_state(page, "snapshot") == "todo"
    assert "81</b> of them notes" in page

    for step in ("snapshot", "internal", "extract", "demote"):
        preview = alice_client.get(url + "&preview=1").content.decode()
        assert f'data-preview="{step}"' in preview
        assert "nothing written" in preview
        with django_capture_on_commit_callbacks(execute=True):
            alice_client.post("/cleanup/apply/", {"scope": "agent:main", "step": step})
        page = alice_client.get(url).content.decode()
        assert _step_state(page, step) == "done", step

    assert "data-cleanup-done" in page
    assert "<b>3</b> of them notes" in page
    assert Memory.objects.active().filter(scope="agent:main").count() == 7

    page = alice_client.post("/cleanup/undo/", {"scope": "agent:main"}, follow=True).content.decode()
    assert "Undone 3 steps: 78 restored, 3 put back, 4 extracted memories tombstoned." in page
    assert Memory.objects.active().filter(scope="agent:main").count() == 81
    assert _step_state(page, "snapshot") == "todo"  # a fresh clean-up


def test_only_the_next_step_can_be_applied(alice_client, polluted):
    page = alice_client.post("/cleanup/apply/", {"scope": "agent:main", "step": "demote"}, follow=True).content.decode()
    assert "Step &#x27;demote&#x27; is not the next one to apply (that is snapshot)." in page
    assert not TaskRun.objects.filter(kind="cleanup").exists()


def test_the_tasks_page_shows_the_decay_schedule_and_runs_it_now(alice_client, django_capture_on_commit_callbacks):
    page = alice_client.get("/tasks/").content.decode()
    assert "decay of expired peripheral memories every 60 min" in page
    assert "Last run: never" in page

    with django_capture_on_commit_callbacks(execute=True):
        page = alice_client.post("/tasks/decay/", follow=True).content.decode()
    run = TaskRun.objects.get(kind="decay")
    assert run.status == "succeeded" and run.actor == "user:alice"
    assert "Decay queued." in page
