"""The back office lists recall traces (read and delete only), profiles and golden sets."""

from __future__ import annotations

import pytest
from django.urls import reverse

from recall.models import GoldenQuery, GoldenSet, RecallProfile, RecallTrace
from recall.pipeline import recall

pytestmark = pytest.mark.django_db


def test_every_recall_model_has_a_working_changelist(alice_client):
    for name in ("recallprofile", "recalltrace", "goldenset"):
        assert alice_client.get(reverse(f"admin:recall_{name}_changelist")).status_code == 200


def test_a_trace_is_read_only_but_can_be_pruned_and_a_golden_set_shows_its_queries(alice_client, indexes, make_memory):
    make_memory("The user's phone number is 18600000000.", kind="entity")
    trace = RecallTrace.record(recall("18600000000", scope="agent:main", selector_config=None), source="cli", actor="t")
    change = alice_client.get(reverse("admin:recall_recalltrace_change", args=[trace.pk]))
    assert change.status_code == 200 and b'name="query"' not in change.content  # no editable field
    assert alice_client.get(reverse("admin:recall_recalltrace_add")).status_code == 403
    pruned = alice_client.post(reverse("admin:recall_recalltrace_delete", args=[trace.pk]), {"post": "yes"})
    assert pruned.status_code == 302 and not RecallTrace.objects.exists()
    golden = GoldenSet.objects.create(name="smoke", scope="agent:main")
    GoldenQuery.objects.create(golden_set=golden, query="phone number of the user")
    page = alice_client.get(reverse("admin:recall_goldenset_change", args=[golden.pk]))
    assert b"phone number of the user" in page.content
    RecallProfile.objects.create(name="strict", knobs={"limit": 2})
    assert b"strict" in alice_client.get(reverse("admin:recall_recallprofile_changelist")).content
