"""Who wrote a memory: a write through the API says `api` unless the writer names its source; the
dashboard's form stays `manual`. The memory list's source filter offers `api`."""

from __future__ import annotations

import pytest
from django.test import Client

from memoryui import rules
from memoryui.models import Memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(agent_token) -> Client:
    # The agent writes with alice's token, which sees every scope.
    return Client(headers={"Authorization": f"Bearer {agent_token}"})


def test_a_memory_written_with_a_token_says_it_came_from_the_api(agent):
    response = agent.post(
        "/api/memories/",
        {"scope": "agent:main", "kind": "fact", "text": "Builds run on gpu-node-3."},
        "application/json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["source"] == "api"
    assert Memory.objects.get(pk=response.json()["id"]).source == "api"
    listed = agent.get("/api/memories/", {"source": "api"}).json()
    assert [memory["id"] for memory in listed["results"]] == [response.json()["id"]]


def test_a_source_the_writer_names_is_kept(agent):
    body = {"scope": "agent:main", "kind": "fact", "text": "Deploys run on Tuesdays.", "source": "extractor:l1"}
    response = agent.post("/api/memories/", body, "application/json")
    assert response.status_code == 201, response.content
    assert Memory.objects.get(pk=response.json()["id"]).source == "extractor:l1"


def test_a_memory_created_on_the_dashboard_is_still_manual(alice_client):
    form = {"scope": "agent:main", "kind": "fact", "text": "The VPN needs a hardware key.", "confidence": "0.7",
            "source": "manual", "metadata": "{}"}  # fmt: skip
    response = alice_client.post("/memories/new/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Memory.objects.get(text="The VPN needs a hardware key.").source == "manual"
    assert "api" in rules.SOURCES
    assert 'value="api"' in alice_client.get("/memories/").content.decode()  # the list's source filter
