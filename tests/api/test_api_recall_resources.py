"""/api/recall/traces/, /api/recall/profiles/ and /api/recall/golden/: reads, writes, scopes, runs, errors."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from memoryui.models import Memory, MemoryEvent
from recall.models import GoldenQuery, GoldenSet, RecallProfile, RecallTrace

pytestmark = pytest.mark.django_db

PHONE = "The user's phone number is 18600000000."
DEPLOY = "Deploys go out on Tuesdays after the release checklist."
# Every signal off (thresholds above 1): no candidate can be strong, so no query is answered.
SILENT_KNOBS = {
    "strong_margin": 2.0,
    "strong_coverage": 2.0,
    "agree_margin": 2.0,
    "weak_margin": 2.0,
    "weak_coverage": 2.0,
}


def bearer(key: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def send(client, method: str, url: str, body=None, **extra):
    if method == "get":
        return client.get(url, **extra)
    data = json.dumps(body) if body is not None else None
    return getattr(client, method)(url, data=data, content_type="application/json", **extra)


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    return error["details"]


def make_trace(scope: str = "agent:main", minutes_ago: int = 0, **fields) -> RecallTrace:
    values = {
        "source": "api", "actor": "token:agent", "query": "phone", "limit": 5, "profile_name": "default",
        "knobs": {"rrf_k": 60}, "mode": "heuristic", "result": {"block": "- [x] the phone", "candidates": []},
    }  # fmt: skip
    values.update(fields)
    return RecallTrace.objects.create(scope=scope, created_at=timezone.now() - timedelta(minutes=minutes_ago), **values)


# --- traces ------------------------------------------------------------------------------


def test_traces_are_listed_newest_first_and_filtered_and_the_detail_holds_the_result(client, agent_token):
    old = make_trace(minutes_ago=10, source="cli")
    new = make_trace(minutes_ago=1, mode="selector")
    other = make_trace(scope="agent:other", minutes_ago=5)
    listing = client.get("/api/recall/traces/", **bearer(agent_token)).json()
    assert listing["count"] == 3
    assert [t["id"] for t in listing["results"]] == [str(new.pk), str(other.pk), str(old.pk)]
    assert "result" not in listing["results"][0]
    assert listing["results"][0]["url"].endswith(f"/api/recall/traces/{new.pk}/")
    for params, expected in (
        ({"scope": "main"}, [new, old]),
        ({"source": "cli"}, [old]),
        ({"mode": "selector"}, [new]),
    ):
        found = client.get("/api/recall/traces/", params, **bearer(agent_token)).json()["results"]
        assert [t["id"] for t in found] == [str(t.pk) for t in expected], params
    detail = client.get(f"/api/recall/traces/{new.pk}/", **bearer(agent_token)).json()
    assert detail["result"] == {"block": "- [x] the phone", "candidates": []} and detail["knobs"] == {"rrf_k": 60}


def test_bad_trace_filters_are_400_naming_each_parameter(client, agent_token):
    response = client.get(
        "/api/recall/traces/", {"scope": "Bad Scope!", "source": "web", "mode": "x"}, **bearer(agent_token)
    )
    assert set(assert_error(response, 400, "invalid")) == {"scope", "source", "mode"}


def test_a_token_sees_only_the_traces_of_its_scopes_and_the_others_are_404(client, mallory_token):
    main, other = make_trace(), make_trace(scope="agent:other")
    listing = client.get("/api/recall/traces/", **bearer(mallory_token)).json()
    assert [t["id"] for t in listing["results"]] == [str(other.pk)]
    assert client.get("/api/recall/traces/", {"scope": "main"}, **bearer(mallory_token)).json()["count"] == 0
    assert_error(client.get(f"/api/recall/traces/{main.pk}/", **bearer(mallory_token)), 404, "not_found")
    assert_error(client.get(f"/api/recall/traces/{uuid.uuid4()}/", **bearer(mallory_token)), 404, "not_found")
    assert client.get(f"/api/recall/traces/{other.pk}/", **bearer(mallory_token)).status_code == 200


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/api/recall/traces/"),
        ("get", f"/api/recall/traces/{uuid.UUID(int=1)}/"),
        ("get", "/api/recall/profiles/"),
        ("post", "/api/recall/profiles/"),
        ("delete", "/api/recall/profiles/default/"),
        ("get", "/api/recall/golden/"),
        ("post", "/api/recall/golden/1/run/"),
    ],
)
def test_anonymous_callers_get_a_json_401(client, method, url):
    assert_error(send(client, method, url, {}), 401, "unauthorized")


# --- profiles ----------------------------------------------------------------------------


def test_profiles_list_the_default_with_its_stored_knobs_and_every_effective_setting(client, agent_token):
    RecallProfile.objects.create(name="tight", knobs={"rrf_k": 30})
    profiles = {p["name"]: p for p in client.get("/api/recall/profiles/", **bearer(agent_token)).json()}
    assert set(profiles) == {"default", "tight"}
    assert profiles["default"]["knobs"] == {} and profiles["default"]["settings"]["rrf_k"] == 60
    assert profiles["tight"]["knobs"] == {"rrf_k": 30} and profiles["tight"]["settings"]["rrf_k"] == 30
    assert {"limit", "strong_margin", "fusion", "selector", "weight_exact"} <= set(profiles["tight"]["settings"])
    one = client.get("/api/recall/profiles/tight/", **bearer(agent_token)).json()
    assert one == profiles["tight"]
    assert_error(client.get("/api/recall/profiles/nope/", **bearer(agent_token)), 404, "not_found")


def test_a_signed_in_user_creates_a_profile_storing_only_the_knobs_that_differ(alice_client):
    body = {"name": "tight", "description": "fewer", "knobs": {"rrf_k": 30, "limit": 5, "selector": False}}
    response = send(alice_client, "post", "/api/recall/profiles/", body)
    assert response.status_code == 201
    assert response["Location"].endswith("/api/recall/profiles/tight/")
    assert response.json()["knobs"] == {"rrf_k": 30, "selector": False}  # limit 5 is the default
    assert RecallProfile.objects.get(name="tight").settings.retrieval.rrf_k == 30


def test_bad_knobs_are_400_naming_each_knob_and_nothing_is_saved(alice_client):
    body = {"name": "Bad Name", "knobs": {"rrf_k": 0, "limit": "many", "nope": 1}}
    details = assert_error(send(alice_client, "post", "/api/recall/profiles/", body), 400, "invalid")
    assert set(details) == {"name", "knobs.rrf_k", "knobs.limit", "knobs.nope"}
    assert "between 1 and 1000" in details["knobs.rrf_k"][0]
    assert "not a recall knob" in details["knobs.nope"][0]
    not_an_object = send(alice_client, "post", "/api/recall/profiles/", {"name": "x", "knobs": [1]})
    assert set(assert_error(not_an_object, 400, "invalid")) == {"knobs"}
    assert not RecallProfile.objects.exclude(name="default").exists()


def test_patch_merges_knobs_null_restores_a_default_and_put_replaces_and_renames(alice_client):
    RecallProfile.objects.create(name="tight", knobs={"rrf_k": 30, "limit": 3})
    patched = send(alice_client, "patch", "/api/recall/profiles/tight/", {"knobs": {"limit": None, "candidates": 7}})
    assert patched.status_code == 200
    assert patched.json()["knobs"] == {"rrf_k": 30, "candidates": 7}
    bad = send(alice_client, "patch", "/api/recall/profiles/tight/", {"knobs": {"candidates": 0}})
    assert set(assert_error(bad, 400, "invalid")) == {"knobs.candidates"}
    put = send(alice_client, "put", "/api/recall/profiles/tight/", {"name": "loose", "knobs": {"rrf_k": 90}})
    assert put.status_code == 200 and put.json()["knobs"] == {"rrf_k": 90}
    assert list(RecallProfile.objects.exclude(name="default").values_list("name", "knobs")) == [
        ("loose", {"rrf_k": 90})
    ]


def test_a_token_may_read_profiles_but_every_write_is_403(client, agent_token):
    RecallProfile.objects.create(name="tight", knobs={"rrf_k": 30})
    assert client.get("/api/recall/profiles/tight/", **bearer(agent_token)).status_code == 200
    attempts = [
        ("post", "/api/recall/profiles/", {"name": "mine"}),
        ("patch", "/api/recall/profiles/tight/", {"knobs": {"rrf_k": 1}}),
        ("put", "/api/recall/profiles/tight/", {"name": "tight"}),
        ("delete", "/api/recall/profiles/tight/", None),
    ]
    for method, url, body in attempts:
        assert_error(send(client, method, url, body, **bearer(agent_token)), 403, "forbidden")
    assert list(RecallProfile.objects.values_list("name", "knobs")) == [("tight", {"rrf_k": 30})]


def test_the_default_profile_cannot_be_deleted_or_renamed_but_others_can_be_deleted(alice_client):
    RecallProfile.objects.resolve("default")  # in use: a refused request leaves nothing behind (api.recall)
    RecallProfile.objects.create(name="tight", knobs={"rrf_k": 30})
    trace = make_trace(profile=RecallProfile.objects.get(name="tight"), profile_name="tight")
    details = assert_error(send(alice_client, "delete", "/api/recall/profiles/default/"), 409, "conflict")
    assert "cannot be deleted" in details["name"][0]
    renamed = send(alice_client, "patch", "/api/recall/profiles/default/", {"name": "other"})
    assert "cannot be renamed" in assert_error(renamed, 400, "invalid")["name"][0]
    assert RecallProfile.objects.filter(name="default").exists()
    assert send(alice_client, "delete", "/api/recall/profiles/tight/").status_code == 204
    assert_error(send(alice_client, "delete", "/api/recall/profiles/tight/"), 404, "not_found")
    trace.refresh_from_db()
    assert trace.profile is None and trace.profile_name == "tight"


# --- golden sets -------------------------------------------------------------------------


@pytest.fixture
def store(indexes, write) -> dict[str, Memory]:
    return {
        "phone": write(PHONE, kind="entity", entity_key="phone:18600000000"),
        "deploy": write(DEPLOY, kind="procedure"),
        "other": write("Escalation for article-list-query in agent:other.", scope="agent:other"),
    }


def create_set(client, auth: dict, **body):
    body = {"name": "main recall", "scope": "main", **body}
    return send(client, "post", "/api/recall/golden/", body, **auth)


def add_query(client, auth: dict, set_id: int, **body):
    return send(client, "post", f"/api/recall/golden/{set_id}/queries/", body, **auth)


def test_a_golden_set_is_created_in_a_normalized_scope_and_answers_with_its_queries(client, agent_token, store):
    auth = bearer(agent_token)
    created = create_set(client, auth)
    assert created.status_code == 201
    golden = created.json()
    assert golden["scope"] == "agent:main" and golden["queries"] == [] and created["Location"] == golden["url"]
    query = add_query(client, auth, golden["id"], query="phone?", expected_ids=[str(store["phone"].pk).upper()])
    assert query.status_code == 201
    assert query.json()["expected_ids"] == [str(store["phone"].pk)] and query.json()["tools"] == []
    detail = client.get(f"/api/recall/golden/{golden['id']}/", **auth).json()
    assert [q["query"] for q in detail["queries"]] == ["phone?"] and detail["query_count"] == 1
    assert [s["name"] for s in client.get("/api/recall/golden/", **auth).json()] == ["main recall"]
    duplicate = create_set(client, auth)
    assert set(assert_error(duplicate, 409, "conflict")) == {"name"}


def test_bad_expected_ids_are_400_naming_the_field_and_add_nothing(client, agent_token, store):
    auth = bearer(agent_token)
    set_id = create_set(client, auth).json()["id"]
    ids = ["not-an-id", str(store["other"].pk), str(uuid.uuid4())]
    details = assert_error(add_query(client, auth, set_id, query="x", expected_ids=ids), 400, "invalid")
    assert set(details) == {"expected_ids"}
    problems = " | ".join(details["expected_ids"])
    assert "'not-an-id' is not a memory id" in problems
    assert f"{ids[1]!r} is in agent:other, not in this set's scope agent:main" in problems
    # Well-formed ids of no memory are a 404 naming them, as any unknown id is.
    unknown = assert_error(add_query(client, auth, set_id, query="x", expected_ids=ids[2:]), 404, "not_found")
    assert unknown["expected_ids"] == [f"no memory has the id {ids[2]}"]
    blank = add_query(client, auth, set_id, query="", surprise=1)
    assert set(assert_error(blank, 400, "invalid")) == {"surprise"}
    assert set(assert_error(add_query(client, auth, set_id, query=""), 400, "invalid")) == {"query"}
    assert not GoldenQuery.objects.exists()


def test_a_golden_query_expecting_nothing_says_so_with_silent_never_with_an_empty_list_alone(
    client, agent_token, store
):
    auth = bearer(agent_token)
    set_id = create_set(client, auth).json()["id"]
    for body in ({}, {"expected_ids": []}, {"silent": False}):
        details = assert_error(add_query(client, auth, set_id, query="quantum", **body), 400, "invalid")
        assert details == {
            "expected_ids": [
                "list the memories recall should return, or send `silent: true` if it should return nothing"
            ]
        }
    both = add_query(client, auth, set_id, query="quantum", silent=True, expected_ids=[str(store["phone"].pk)])
    assert set(assert_error(both, 400, "invalid")) == {"silent"}
    keyword = assert_error(add_query(client, auth, set_id, query="quantum", expected_ids=["none"]), 400, "invalid")
    assert "send `silent: true`" in keyword["expected_ids"][0]
    assert not GoldenQuery.objects.exists()
    silent = add_query(client, auth, set_id, query="quantum", silent=True)
    assert silent.status_code == 201 and silent.json()["silent"] is True and silent.json()["expected_ids"] == []
    phone = add_query(client, auth, set_id, query="phone?", expected_ids=[str(store["phone"].pk)[:8]])
    assert phone.status_code == 201, phone.content
    assert phone.json()["silent"] is False and phone.json()["expected_ids"] == [str(store["phone"].pk)]
    queries = client.get(f"/api/recall/golden/{set_id}/", **auth).json()["queries"]
    assert [(q["query"], q["silent"]) for q in queries] == [("quantum", True), ("phone?", False)]
    assert list(GoldenQuery.objects.order_by("pk").values_list("expected_ids", flat=True)) == [
        [],
        [str(store["phone"].pk)],
    ]


def test_a_token_only_sees_and_writes_golden_sets_of_its_scopes(client, agent_token, mallory_token, store):
    main_id = create_set(client, bearer(agent_token)).json()["id"]
    mallory = bearer(mallory_token)
    details = assert_error(create_set(client, mallory, name="hers"), 403, "forbidden")
    assert set(details) == {"scope"}
    assert client.get("/api/recall/golden/", **mallory).json() == []
    for method, url in (
        ("get", f"/api/recall/golden/{main_id}/"),
        ("patch", f"/api/recall/golden/{main_id}/"),
        ("delete", f"/api/recall/golden/{main_id}/"),
        ("post", f"/api/recall/golden/{main_id}/queries/"),
        ("post", f"/api/recall/golden/{main_id}/run/"),
    ):
        assert_error(send(client, method, url, {"query": "x"}, **mallory), 404, "not_found")
    own_id = create_set(client, mallory, name="hers", scope="other").json()["id"]
    # A memory of a scope she cannot see does not exist for her: no hint of where it lives.
    leaked = add_query(client, mallory, own_id, query="x", expected_ids=[str(store["phone"].pk)])
    assert assert_error(leaked, 404, "not_found")["expected_ids"] == [f"no memory has the id {store['phone'].pk}"]
    moved = send(client, "patch", f"/api/recall/golden/{own_id}/", {"scope": "main"}, **mallory)
    assert_error(moved, 403, "forbidden")
    assert GoldenSet.objects.get(pk=own_id).scope == "agent:other"


def test_a_golden_set_is_edited_and_its_queries_and_itself_deleted(alice_client, store):
    set_id = create_set(alice_client, {}).json()["id"]
    query_id = add_query(alice_client, {}, set_id, query="phone", expected_ids=[str(store["phone"].pk)]).json()["id"]
    rescoped = send(alice_client, "patch", f"/api/recall/golden/{set_id}/", {"scope": "other"})
    assert "not in agent:other" in assert_error(rescoped, 400, "invalid")["scope"][0]
    renamed = send(alice_client, "patch", f"/api/recall/golden/{set_id}/", {"name": "renamed", "description": "d"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "renamed"
    assert_error(send(alice_client, "put", f"/api/recall/golden/{set_id}/", {}), 405, "method_not_allowed")
    other_set = GoldenSet.objects.create(name="other", scope="agent:main")
    assert_error(
        send(alice_client, "delete", f"/api/recall/golden/{other_set.pk}/queries/{query_id}/"), 404, "not_found"
    )
    assert send(alice_client, "delete", f"/api/recall/golden/{set_id}/queries/{query_id}/").status_code == 204
    assert not GoldenQuery.objects.exists()
    assert send(alice_client, "delete", f"/api/recall/golden/{set_id}/").status_code == 204
    assert_error(alice_client.get(f"/api/recall/golden/{set_id}/"), 404, "not_found")


def test_a_run_scores_a_profile_and_compares_it_without_changing_anything(client, agent_token, store):
    RecallProfile.objects.create(name="silent", knobs=SILENT_KNOBS)
    auth = bearer(agent_token)
    set_id = create_set(client, auth).json()["id"]
    phone = str(store["phone"].pk)
    phone_query = add_query(client, auth, set_id, query="18600000000", expected_ids=[phone]).json()["id"]
    add_query(client, auth, set_id, query="quantum entanglement of photons", silent=True)
    response = send(client, "post", f"/api/recall/golden/{set_id}/run/", {"compare": "silent"}, **auth)
    assert response.status_code == 200
    run = response.json()
    assert run["profile"] == "default" and run["limit"] == 5
    assert run["metrics"] == {
        "recall@5": 1.0,
        "block_precision": 1.0,
        "top1": 1.0,
        "no_result_precision": 1.0,
        "no_result_recall": 1.0,
    }
    assert [(o["recalled"], o["passed"], o["unexpected"]) for o in run["outcomes"]] == [
        ([phone], True, []),
        ([], True, []),
    ], "the phone number alone is handed over: nothing else in the store answers it"
    assert run["outcomes"][0]["mode"] == "heuristic" and run["outcomes"][0]["error"] == ""
    silent = run["compare"]
    assert silent["profile"] == "silent"
    assert [(o["recalled"], o["passed"]) for o in silent["outcomes"]] == [([], False), ([], True)]
    assert silent["metrics"] == {
        "recall@5": 0.0,
        "block_precision": None,
        "top1": 0.0,
        "no_result_precision": 0.5,
        "no_result_recall": 1.0,
    }
    first_move = run["movements"][0]
    assert first_move["query_id"] == phone_query and phone in first_move["moved_out"] and first_move["moved_in"] == []
    assert (first_move["passed_a"], first_move["passed_b"]) == (True, False)
    assert Memory.objects.get(pk=phone).access_count == 0
    assert not MemoryEvent.objects.filter(action="recalled").exists() and not RecallTrace.objects.exists()
    alone = send(client, "post", f"/api/recall/golden/{set_id}/run/", None, **auth).json()
    assert alone["metrics"]["top1"] == 1.0 and alone["compare"] is None and alone["movements"] is None


def test_a_run_with_unknown_profiles_is_404_naming_each(alice_client, store):
    set_id = create_set(alice_client, {}).json()["id"]
    body = {"profile": "nope", "compare": "neither"}
    details = assert_error(send(alice_client, "post", f"/api/recall/golden/{set_id}/run/", body), 404, "not_found")
    assert set(details) == {"profile", "compare"}
    assert "no profile named 'nope'" in details["profile"][0]
    assert_error(send(alice_client, "post", "/api/recall/golden/999/run/", {}), 404, "not_found")
