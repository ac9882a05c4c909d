"""The Duplicates page, the Clean-up wizard and undo, through the Django test client."""

from __future__ import annotations

import uuid

import pytest

from ingest import jsonl
from ingest.ingestion import ingest
from ingest.tasks import enqueue_extraction
from memoryui.models import DistinctPair, Memory, MemoryEvent, TaskRun
from web import demo

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


HTMX = {"HX-Request": "true", "HX-Target": "duplicates"}


def test_each_row_shows_the_short_id_linking_to_the_memory_and_when_it_was_created(alice_client, twins):
    keep, other = twins
    page = alice_client.get("/duplicates/?scope=agent:main").content.decode()

    for memory in twins:
        assert f'href="/memories/{memory.pk}/" data-member-id>{str(memory.pk)[:8]}</a>' in page
    assert '<span class="muted" data-member-created><time datetime="' in page
    assert page.count("data-linked-by>same text</td>") == 1


def test_a_merge_is_asked_first_with_what_it_will_do_and_an_unconfirmed_post_changes_nothing(alice_client, twins):
    keep, other = twins
    events = MemoryEvent.objects.count()

    response = alice_client.post("/duplicates/merge/", {"scope": "agent:main", "member": [keep.pk, other.pk]})

    page = response.content.decode()
    assert response.status_code == 200 and "data-confirm" in page
    assert "Merge 2 memories into one?" in page
    assert f"Tombstones 1 memory and keeps “Prefers tabs.” ({str(keep.pk)[:8]})." in page
    assert 'name="confirmed" value="1"' in page and f'name="member" value="{other.pk}"' in page
    assert MemoryEvent.objects.count() == events
    assert Memory.objects.active().count() == 2


def test_an_htmx_merge_asks_in_the_dialog(alice_client, twins):
    response = alice_client.post(
        "/duplicates/merge/", {"scope": "agent:main", "member": [m.pk for m in twins]}, headers=HTMX
    )
    assert response["HX-Retarget"] == "#confirm-dialog"
    assert 'hx-target="#duplicates"' in response.content.decode()
    assert Memory.objects.active().count() == 2


def test_a_confirmed_merge_names_the_kept_memory_offers_undo_and_the_undo_asks_then_restores(alice_client, twins):
    keep, other = twins
    response = alice_client.post(
        "/duplicates/merge/",
        {"scope": "agent:main", "member": [keep.pk, other.pk], "canonical": other.pk, "confirmed": "1"},
        follow=True,
    )
    page = response.content.decode()
    assert f'Merged 1 duplicate into <a href="/memories/{other.pk}/">“prefers TABS.”</a>.' in page
    keep.refresh_from_db()
    assert keep.status == "tombstoned" and keep.metadata["merged_into"] == str(other.pk)
    batch = MemoryEvent.objects.get(memory=keep, action="tombstoned").batch
    undo_url = f"/batches/{batch}/undo/?next=%2Fduplicates%2F%3Fscope%3Dagent%253Amain"
    assert f'href="{undo_url}"' in page  # in the message
    assert 'data-action="undo-merge"' in page  # and on the page, after the message is gone

    asked = alice_client.get(undo_url).content.decode()
    assert "Undo these changes?" in asked
    assert "Restores 1 memory it tombstoned." in asked
    assert "Puts back the values 1 memory had before it" in asked
    unconfirmed = alice_client.post(undo_url).content.decode()
    assert "Restores 1 memory it tombstoned." in unconfirmed
    assert Memory.objects.get(pk=keep.pk).status == "tombstoned"  # asking changed nothing

    page = alice_client.post(undo_url, {"confirmed": "1"}, follow=True).content.decode()
    assert "Undone: restored 1 memory, put back 1 as before." in page
    keep.refresh_from_db()
    assert keep.status == "active"
    assert 'data-action="undo-merge"' not in page


def test_merging_several_says_duplicates_and_an_htmx_merge_answers_with_the_clusters(alice_client, twins):
    third = _restore("PREFERS TABS.")
    response = alice_client.post(
        "/duplicates/merge/",
        {"scope": "agent:main", "member": [*(m.pk for m in twins), third.pk], "confirmed": "1"},
        headers={**HTMX, "X-Memoryui-Replace-Alerts": "1"},
    )
    body = response.content.decode()
    assert "<html" not in body and "data-summary" in body
    assert "Merged 2 duplicates into" in body and 'id="alerts"' in body  # the message, out of band
    assert Memory.objects.active().count() == 1


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
    assert "Marked as not duplicates (1 pair)" in page
    assert DistinctPair.objects.count() == 1
    assert 'data-state="empty"' in page


def test_merge_all_asks_with_the_counts_then_runs_as_a_task_whose_page_offers_the_undo(
    alice_client, twins, django_capture_on_commit_callbacks
):
    asked = alice_client.post("/duplicates/apply/", {"scope": "agent:main"}).content.decode()
    assert "Merge all 1 cluster at 0.985?" in asked
    assert "Tombstones 1 memory and keeps 1, the proposed one of each cluster: “Prefers tabs.”." in asked
    assert not TaskRun.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        alice_client.post("/duplicates/apply/", {"scope": "agent:main", "confirmed": "1"})
    run = TaskRun.objects.get(kind="dedup")
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert (run.status, run.counts) == ("succeeded", {"clusters": 1, "merged": 1})
    assert f'href="/batches/{run.result["batch"]}/undo/?next=' in page and 'data-undo-state="undoable"' in page

    alice_client.post(f"/batches/{run.result['batch']}/undo/", {"confirmed": "1"})
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'data-undo-state="undone"' in page
    assert "data-undone>undone</span>" in alice_client.get("/tasks/").content.decode()


def test_kept_apart_shows_each_pair_of_texts_once_with_its_copies(alice_client, indexes, settings):
    settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD = 0.95
    for _ in range(3):
        _restore("Deploys go out on Fridays after the 3 smoke tests.", kind="procedure")
    for _ in range(2):
        _restore("Deploys go out on Fridays after the 4 smoke tests.", kind="procedure")

    page = alice_client.get("/duplicates/?scope=agent:main").content.decode()

    assert page.count("<tr data-pair>") == 1
    assert "×3 copies" in page and "×2 copies" in page
    assert "the numbers differ" in page


def test_an_extraction_task_offers_the_undo_of_what_it_added(alice_client, django_capture_on_commit_callbacks):
    messages = []
    for text in ("我的幸运数字是88", "I prefer terse answers"):
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    transcript = ingest({"scope": "agent:main", "messages": messages}).transcript
    with django_capture_on_commit_callbacks(execute=True):
        run = enqueue_extraction(transcript, actor="user:alice", foreground=True)
    page = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'data-undo-state="undoable"' in page

    asked = alice_client.get(f"/batches/{run.pk}/undo/?next={run.get_absolute_url()}").content.decode()
    assert "Tombstones 2 memories it added." in asked
    assert Memory.objects.active().count() == 2

    response = alice_client.post(f"/batches/{run.pk}/undo/?next={run.get_absolute_url()}", {"confirmed": "1"})
    assert response["Location"] == run.get_absolute_url()
    assert Memory.objects.active().count() == 0


def test_an_undo_that_would_overwrite_later_changes_is_refused_and_says_so(alice_client, make_memory):
    memory = make_memory("Prefers tabs.", kind="preference")
    batch = uuid.uuid4()
    memory.apply_action("pin", actor="alice", batch=batch)
    memory.edit(actor="bob", text="Prefers tabs, width 4.")

    page = alice_client.get(f"/batches/{batch}/undo/", follow=True).content.decode()

    assert "Not undone: 1 memory changed after batch" in page
    assert Memory.objects.get(pk=memory.pk).pinned
    asked = alice_client.get(f"/batches/{batch}/undo/", headers={"HX-Request": "true"})
    assert (asked.status_code, asked["HX-Retarget"]) == (409, "#alerts")  # not into the Undo link


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
        assert "Preview, nothing written yet:" in preview
        with django_capture_on_commit_callbacks(execute=True):
            alice_client.post("/cleanup/apply/", {"scope": "agent:main", "step": step, "confirmed": "1"})
        page = alice_client.get(url).content.decode()
        assert _step_state(page, step) == "done", step
        assert "task: applied <time" in page

    assert "data-cleanup-done" in page
    assert "<b>3</b> of them notes" in page
    assert Memory.objects.active().filter(scope="agent:main").count() == 7

    page = alice_client.post("/cleanup/undo/", {"scope": "agent:main", "confirmed": "1"}, follow=True).content.decode()
    assert "Undid the clean-up: restored 78 memories, put back 3 as before, tombstoned 4 it had added." in page
    assert Memory.objects.active().filter(scope="agent:main").count() == 81
    assert _step_state(page, "snapshot") == "todo"  # a fresh clean-up


def test_the_backup_step_previews_what_it_would_do_and_names_the_file_once_written(
    alice_client, polluted, django_capture_on_commit_callbacks
):
    preview = alice_client.get("/cleanup/?scope=agent:main&preview=1").content.decode()
    assert "Would back up 81 memories (tombstoned ones included) to " in preview
    assert "backed up" not in preview.lower().replace("would back up", "")

    with django_capture_on_commit_callbacks(execute=True):
        alice_client.post("/cleanup/apply/", {"scope": "agent:main", "step": "snapshot", "confirmed": "1"})
    page = alice_client.get("/cleanup/?scope=agent:main").content.decode()
    run = TaskRun.objects.get(kind="cleanup")
    assert f"Backed up 81 memories (tombstoned ones included) to {run.result['backup']}." in page


def test_applying_a_step_is_asked_first_with_its_counts_and_an_unconfirmed_post_changes_nothing(
    alice_client, polluted, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        alice_client.post("/cleanup/apply/", {"scope": "agent:main", "step": "snapshot", "confirmed": "1"})
    events = MemoryEvent.objects.count()

    asked = alice_client.post(
        "/cleanup/apply/", {"scope": "agent:main", "step": "internal"}, headers={"HX-Request": "true"}
    )

    body = asked.content.decode()
    assert asked["HX-Retarget"] == "#confirm-dialog"
    assert "Apply step 2: Tombstone internal prompts and chit-chat?" in body
    assert "Tombstones 74 notes: internal prompts and chit-chat, repeats included." in body
    assert "“Undo step 2” on this page puts every memory it changed back as it was." in body
    assert MemoryEvent.objects.count() == events
    assert TaskRun.objects.filter(kind="cleanup").count() == 1


def test_undoing_a_step_is_asked_first_with_its_counts(alice_client, polluted, django_capture_on_commit_callbacks):
    for step in ("snapshot", "internal"):
        with django_capture_on_commit_callbacks(execute=True):
            alice_client.post("/cleanup/apply/", {"scope": "agent:main", "step": step, "confirmed": "1"})
    active = Memory.objects.active().count()

    asked = alice_client.post("/cleanup/undo/", {"scope": "agent:main", "last": "1"}).content.decode()

    assert "Undo step 2?" in asked and "Restores 74 memories it tombstoned." in asked
    assert Memory.objects.active().count() == active
    page = alice_client.post(
        "/cleanup/undo/", {"scope": "agent:main", "last": "1", "confirmed": "1"}, follow=True
    ).content.decode()
    assert "Undid step 2: restored 74 memories." in page
    assert Memory.objects.active().count() == active + 74


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
