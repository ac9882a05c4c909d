"""The demo's transcripts: the Transcripts page is not empty on a first start. Two conversations,
one ending in an open tool exchange (a call with no result), which the projection trims; seeding
again adds nothing."""

from __future__ import annotations

import pytest

from ingest.transcripts import IN_FLIGHT, projection_of
from memoryui.models import Transcript
from web import demo

pytestmark = pytest.mark.django_db


def test_seeding_stores_two_transcripts_once_and_one_ends_mid_call():
    demo.seed_clean()
    demo.seed_clean()
    assert demo.seed_transcripts() == 0

    transcripts = {t.external_id: t for t in Transcript.objects.all()}
    assert sorted(transcripts) == ["demo-gpu-node-17", "demo-onboarding"]
    finished = projection_of(transcripts["demo-onboarding"])
    assert finished.trimmed == [] and IN_FLIGHT not in [r.state for r in finished.rounds]

    crashed = projection_of(transcripts["demo-gpu-node-17"])
    assert [(m.index, m.role, [c.name for c in m.tool_calls]) for m in crashed.trimmed] == [
        (5, "assistant", ["mcp__ops__drain-node"])
    ]
    assert crashed.rounds[-1].state == IN_FLIGHT
