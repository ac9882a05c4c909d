"""The recall API's profile and golden-set writes are one transaction each, as the store's are
(`rest.WriteTransactionMixin`): an answer that fails (the database went away as it was made) is a
503 that leaves nothing of the request behind, a name another request took meanwhile is refused as
any taken name is (not a 500), and a golden run, which only reads, holds no write transaction.

alice is an admin (profiles are hers to change), erin an editor; see tests/conftest.py.
"""

from __future__ import annotations

import json

import pytest
from django.db import OperationalError, transaction

from api import recall as recall_api
from api.serializers_recall import GoldenQuerySerializer, GoldenSetDetailSerializer, ProfileSerializer
from recall import golden
from recall.models import GoldenQuery, GoldenSet, RecallProfile

PROFILES = "/api/recall/profiles/"
GOLDEN = "/api/recall/golden/"


def send(client, method: str, url: str, body: dict):
    return getattr(client, method)(url, data=json.dumps(body), content_type="application/json")


def the_database_fails_as_the_answer_is_made(monkeypatch, serializer) -> None:
    def fail(self, instance):
        raise OperationalError("database is locked")

    monkeypatch.setattr(serializer, "to_representation", fail)


def assert_unavailable(response) -> None:
    assert response.status_code == 503, response.content
    error = response.json()["error"]
    assert (error["code"], error["details"]["backend"]) == ("backend_unavailable", "database")
    assert response["Retry-After"]


@pytest.fixture
def golden_set() -> GoldenSet:
    return GoldenSet.objects.create(name="phones", scope="agent:main")


@pytest.mark.django_db
def test_a_profile_created_or_changed_whose_answer_failed_is_not_kept(alice_client, monkeypatch):
    RecallProfile.objects.create(name="tight", description="as it was")
    the_database_fails_as_the_answer_is_made(monkeypatch, ProfileSerializer)

    assert_unavailable(send(alice_client, "post", PROFILES, {"name": "terse", "knobs": {"rrf_k": 30}}))
    assert_unavailable(send(alice_client, "patch", f"{PROFILES}tight/", {"description": "changed"}))

    assert not RecallProfile.objects.filter(name="terse").exists()
    assert RecallProfile.objects.get(name="tight").description == "as it was"


@pytest.mark.django_db
def test_a_golden_set_created_or_renamed_whose_answer_failed_is_not_kept(erin_client, golden_set, monkeypatch):
    the_database_fails_as_the_answer_is_made(monkeypatch, GoldenSetDetailSerializer)

    assert_unavailable(send(erin_client, "post", GOLDEN, {"name": "deploys", "scope": "agent:main"}))
    assert_unavailable(send(erin_client, "patch", f"{GOLDEN}{golden_set.pk}/", {"name": "renamed"}))

    assert list(GoldenSet.objects.values_list("name", flat=True)) == ["phones"]


@pytest.mark.django_db
def test_a_golden_query_whose_answer_failed_is_not_kept(erin_client, golden_set, monkeypatch):
    the_database_fails_as_the_answer_is_made(monkeypatch, GoldenQuerySerializer)

    assert_unavailable(
        send(erin_client, "post", f"{GOLDEN}{golden_set.pk}/queries/", {"query": "my phone?", "silent": True})
    )

    assert not GoldenQuery.objects.exists()


@pytest.mark.django_db
def test_a_golden_set_name_taken_meanwhile_is_a_409_not_a_500(erin_client, monkeypatch):
    check = recall_api._check_name_free

    def another_request_takes_it(name, scope, **kwargs):
        check(name, scope, **kwargs)
        if not GoldenSet.objects.filter(name=name, scope=scope).exists():
            GoldenSet.objects.create(name=name, scope=scope)  # as a request committing just now would

    monkeypatch.setattr(recall_api, "_check_name_free", another_request_takes_it)

    response = send(erin_client, "post", GOLDEN, {"name": "deploys", "scope": "agent:main"})

    assert response.status_code == 409, response.content
    assert response.json()["error"]["details"] == {"name": ["agent:main already has a golden set named 'deploys'"]}


@pytest.mark.django_db
def test_a_profile_name_taken_meanwhile_is_refused_as_a_taken_name_is(alice_client, monkeypatch):
    validate = ProfileSerializer.validate_name

    def another_request_takes_it(self, value):
        value = validate(self, value)
        if not RecallProfile.objects.filter(name=value).exists():
            RecallProfile.objects.create(name=value)  # as a request committing just now would
        return value

    monkeypatch.setattr(ProfileSerializer, "validate_name", another_request_takes_it)

    response = send(alice_client, "post", PROFILES, {"name": "terse"})
    monkeypatch.undo()
    RecallProfile.objects.create(name="taken")
    taken_anyway = send(alice_client, "post", PROFILES, {"name": "taken"})

    assert response.status_code == 400, response.content
    assert response.json()["error"]["details"] == taken_anyway.json()["error"]["details"]
    assert "already exists" in response.json()["error"]["details"]["name"][0]


@pytest.mark.django_db(transaction=True)
def test_a_write_holds_its_transaction_and_a_golden_run_holds_none(erin_client, golden_set, monkeypatch):
    seen = {}
    check, evaluate = recall_api._check_name_free, golden.evaluate

    def check_in_transaction(*args, **kwargs):
        seen["write"] = transaction.get_connection().in_atomic_block
        return check(*args, **kwargs)

    def evaluate_in_transaction(*args, **kwargs):
        seen["run"] = transaction.get_connection().in_atomic_block
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(recall_api, "_check_name_free", check_in_transaction)
    monkeypatch.setattr(golden, "evaluate", evaluate_in_transaction)

    assert send(erin_client, "patch", f"{GOLDEN}{golden_set.pk}/", {"description": "d"}).status_code == 200
    assert send(erin_client, "post", f"{GOLDEN}{golden_set.pk}/run/", {"profile": "default"}).status_code == 200

    assert seen == {"write": True, "run": False}
