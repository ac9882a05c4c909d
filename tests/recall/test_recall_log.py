"""The recall log: an entry for every memory a recall handed to an agent (API, MCP, the command) or a
saved playground run picked, linked to the recall's trace only when it was traced; pruned with the
agents' traces after MEMORYUI_RECALL_RETENTION_DAYS."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from mcpserver import tools
from memoryui.models import ApiToken, Memory
from recall.models import RecallLogEntry, RecallTrace
from recall.tasks import prune_recall_history, prune_recall_history_task

pytestmark = pytest.mark.django_db

ESCALATION = "Escalation path for article-list-query: the owner is the ATA platform team."
PHONE = "The user's phone number is 18600000000."


@pytest.fixture
def store(indexes, write) -> dict[str, Memory]:
    return {
        "escalation": write(ESCALATION, kind="procedure"),
        "phone": write(PHONE, kind="entity", entity_key="phone:18600000000"),
    }


def api_recall(client, token: str, **body):
    body = {"scope": "agent:main", **body}
    response = client.post(
        "/api/recall/", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_every_api_recall_is_logged_and_only_a_sampled_one_links_its_trace(store, client, agent_token, settings):
    settings.MEMORYUI_RECALL_TRACE_RATE = 0.0
    unsampled = api_recall(client, agent_token, query="18600000000")
    settings.MEMORYUI_RECALL_TRACE_RATE = 1.0
    sampled = api_recall(client, agent_token, query="what is the phone number 18600000000")

    assert unsampled["trace_id"] is None and sampled["trace_id"] is not None
    newest, oldest = RecallLogEntry.objects.filter(memory=store["phone"])
    assert (oldest.query, oldest.source, oldest.scope, oldest.profile_name) == (
        "18600000000",
        "api",
        "agent:main",
        "default",
    )
    assert oldest.trace is None
    assert newest.query == "what is the phone number 18600000000" and str(newest.trace_id) == sampled["trace_id"]
    # One entry for each memory handed over, as many as the `recalled` events beside them.
    selected = [s["id"] for s in unsampled["selected"]] + [s["id"] for s in sampled["selected"]]
    assert RecallLogEntry.objects.count() == len(selected) == Memory.objects.get(pk=store["phone"].pk).access_count


def test_a_recall_that_asks_for_a_trace_is_linked_whatever_the_rate(store, client, agent_token, settings):
    settings.MEMORYUI_RECALL_TRACE_RATE = 0.0
    answer = api_recall(client, agent_token, query="18600000000", trace=True, profile="default")
    [entry] = RecallLogEntry.objects.all()
    assert str(entry.trace_id) == answer["trace_id"] and entry.trace.log_entries.get() == entry


def test_a_recall_that_hands_over_nothing_logs_nothing(store, client, agent_token):
    answer = api_recall(client, agent_token, query="quantum entanglement of deployments")
    assert answer["selected"] == [] and not RecallLogEntry.objects.exists()


def test_an_mcp_recall_is_logged_as_mcp_with_the_sampled_trace(store, agent_token, settings):
    settings.MEMORYUI_RECALL_TRACE_RATE = 1.0
    caller = tools.Caller(scope="agent:main", token=ApiToken.authenticate(agent_token))
    answer = tools.recall(caller, "18600000000")
    [entry] = RecallLogEntry.objects.all()
    assert entry.memory_id == store["phone"].pk and entry.source == "mcp"
    assert str(entry.trace_id) == answer["trace_id"] and entry.trace.source == "mcp"


def test_the_command_logs_its_recall_as_cli_and_a_dry_run_logs_nothing(store):
    call_command("recall", "18600000000", "--scope", "main", "--dry-run", stdout=io.StringIO())
    assert not RecallLogEntry.objects.exists()
    call_command("recall", "18600000000", "--scope", "main", "--trace", stdout=io.StringIO())
    [entry] = RecallLogEntry.objects.all()
    assert entry.source == "cli" and entry.trace == RecallTrace.objects.get(source="cli")


def test_a_playground_run_is_logged_when_it_is_saved_as_a_trace(store, alice_client):
    html = alice_client.get("/recall/", {"q": "18600000000", "scope": "agent:main"}).content.decode()
    assert not RecallLogEntry.objects.exists()  # a run in the playground hands nothing to an agent
    payload = re.search(r'name="payload" value="([^"]+)"', html).group(1)
    alice_client.post("/recall/traces/save/", {"payload": payload})
    trace = RecallTrace.objects.get()
    [entry] = RecallLogEntry.objects.all()
    assert (entry.memory_id, entry.source, entry.trace, entry.created_at) == (
        store["phone"].pk,
        "playground",
        trace,
        trace.created_at,
    )


def test_a_long_query_is_kept_capped_and_marked_cut(store):
    query = "电话 " * 400
    RecallLogEntry.objects.record(
        [store["phone"].pk], query=query, scope="agent:main", profile_name="default", source="api"
    )
    kept = RecallLogEntry.objects.get().query
    assert len(kept) == RecallLogEntry.QUERY_MAX_LENGTH and kept.endswith("…") and query.startswith(kept[:-1])


def test_a_memory_log_reads_newest_first(store):
    now = timezone.now()
    for hours, query in ((3, "oldest"), (1, "newest"), (2, "middle")):
        RecallLogEntry.objects.record(
            [store["phone"].pk], query=query, scope="agent:main", profile_name="default", source="api",
            created_at=now - timedelta(hours=hours),
        )  # fmt: skip
    RecallLogEntry.objects.record(
        [store["escalation"].pk], query="other", scope="agent:main", profile_name="d", source="cli"
    )
    log = RecallLogEntry.objects.filter(memory=store["phone"])
    assert [entry.query for entry in log] == ["newest", "middle", "oldest"]


def test_pruning_drops_entries_and_agents_traces_past_the_retention_and_keeps_saved_traces(store, settings):
    settings.MEMORYUI_RECALL_RETENTION_DAYS = 30
    now = timezone.now()
    old, recent = now - timedelta(days=31), now - timedelta(days=29)

    def trace(source: str, created_at) -> RecallTrace:
        return RecallTrace.objects.create(
            source=source, actor="test", scope="agent:main", query="q", limit=5, profile_name="default",
            mode="heuristic", result={}, created_at=created_at,
        )  # fmt: skip

    old_api, old_mcp, saved = trace("api", old), trace("mcp", old), trace("playground", old)
    recent_api = trace("api", recent)
    fields = {"scope": "agent:main", "profile_name": "default", "source": "api"}
    RecallLogEntry.objects.record([store["phone"].pk], query="old", trace=old_api, created_at=old, **fields)
    RecallLogEntry.objects.record([store["phone"].pk], query="recent", trace=recent_api, created_at=recent, **fields)
    RecallLogEntry.objects.record([store["escalation"].pk], query="saved", trace=saved, created_at=recent, **fields)

    assert prune_recall_history(now) == {"log_entries_pruned": 1, "traces_pruned": 2}
    assert sorted(RecallLogEntry.objects.values_list("query", flat=True)) == ["recent", "saved"]
    assert set(RecallTrace.objects.all()) == {recent_api, saved}
    assert not RecallTrace.objects.filter(pk__in=[old_api.pk, old_mcp.pk]).exists()
    assert prune_recall_history(now) == {"log_entries_pruned": 0, "traces_pruned": 0}


def test_an_entry_outlives_a_deleted_trace_without_its_link(store):
    trace = RecallTrace.objects.create(
        source="api", actor="test", scope="agent:main", query="q", limit=5, profile_name="default",
        mode="heuristic", result={},
    )  # fmt: skip
    RecallLogEntry.objects.record(
        [store["phone"].pk], query="q", scope="agent:main", profile_name="default", source="api", trace=trace
    )
    trace.delete()
    assert RecallLogEntry.objects.get().trace is None


def test_pruning_is_on_the_schedule(settings):
    assert settings.CELERY_BEAT_SCHEDULE["prune-recall-history"]["task"] == prune_recall_history_task.name
