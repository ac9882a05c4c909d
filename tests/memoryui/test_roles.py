"""Roles (viewer < editor < admin) in the pages, the API, the back office and the commands, and
tokens that are read or write and never do more than their owner's role allows.

bob is a viewer, erin an editor, alice an admin (a superuser); see tests/conftest.py.
"""

from __future__ import annotations

import io
import json

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.test import Client

from ingest.ingestion import ingest
from mcpserver import tools
from memoryui import roles
from memoryui.models import ApiToken, Memory
from recall.models import GoldenSet, RecallProfile

pytestmark = pytest.mark.django_db

MEMORIES = "/api/memories/"
TOKENS = "/api/tokens/"
PROFILES = "/api/recall/profiles/"
PHONE = "The user's phone number is 18600000000."


def bearer(key: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {key}"})


def send(client: Client, method: str, url: str, body=None):
    if body is None:
        return getattr(client, method)(url)
    return getattr(client, method)(url, data=json.dumps(body), content_type="application/json")


def assert_forbidden(response, says: str) -> dict:
    assert response.status_code == 403, response.content
    error = response.json()["error"]
    assert error["code"] == "forbidden"
    assert says in error["message"]
    return error


@pytest.fixture
def memory(make_memory) -> Memory:
    return make_memory("Prefers terse answers.")


@pytest.fixture
def recall_store(indexes, write) -> dict[str, Memory]:
    return {"phone": write(PHONE, kind="entity", entity_key="phone:18600000000")}


# --- who has which role ------------------------------------------------------------------------


def test_the_highest_group_wins_a_superuser_is_admin_and_a_user_in_no_group_a_viewer(alice, bob, erin):
    assert roles.role_of(alice) is roles.Role.ADMIN
    assert roles.role_of(bob) is roles.Role.VIEWER
    assert roles.role_of(erin) is roles.Role.EDITOR
    both = get_user_model().objects.create_user("both")
    both.groups.add(Group.objects.get(name="viewer"), Group.objects.get(name="admin"))
    assert roles.role_of(both) is roles.Role.ADMIN
    assert roles.has_role(erin, roles.Role.VIEWER) and not roles.has_role(erin, roles.Role.ADMIN)
    erin.is_active = False
    assert roles.role_of(erin) is None and not roles.has_role(erin, roles.Role.VIEWER)


# --- pages -------------------------------------------------------------------------------------


def test_a_viewer_reads_the_pages_without_the_controls_that_change_memories(bob_client, memory):
    listing = bob_client.get("/memories/").content.decode()
    detail = bob_client.get(f"/memories/{memory.pk}/").content.decode()
    found = bob_client.get("/memories/", {"q": "terse", "match": "text"}).content.decode()

    assert "Prefers terse answers." in listing and "Prefers terse answers." in found
    assert 'id="bulk-form"' not in listing and f"/memories/{memory.pk}/pin/" not in listing
    assert "/memories/new/" not in listing and 'data-needs-role="editor"' in listing
    assert "/memories/import/" not in listing
    assert f"/memories/{memory.pk}/edit/" not in detail and "tombstone/" not in detail
    assert 'data-needs-role="editor"' in detail and 'data-role="viewer"' in detail
    assert 'href="/admin/"' not in detail


def test_an_editor_sees_the_controls(erin_client, memory):
    listing = erin_client.get("/memories/").content.decode()

    assert 'id="bulk-form"' in listing and f"/memories/{memory.pk}/pin/" in listing
    assert 'href="/admin/"' not in listing  # the back office is for admins


@pytest.mark.parametrize(
    ("url", "data"),
    [
        ("/memories/new/", {"scope": "agent:main", "kind": "fact", "text": "A viewer wrote this.", "source": "manual"}),
        ("/memories/{pk}/pin/", {}),
        ("/memories/{pk}/tombstone/", {"reason": "viewer"}),
        ("/memories/bulk/", {"action": "pin", "ids": "{pk}"}),
        ("/memories/{pk}/edit/", {"scope": "agent:main", "kind": "fact", "text": "Edited by a viewer."}),
        ("/memories/import/", {"token": "any", "confirmed": "1"}),
    ],
)
def test_a_viewer_posting_a_change_gets_a_403_page_naming_the_editor_role(bob_client, memory, url, data):
    data = {key: value.format(pk=memory.pk) for key, value in data.items()}

    response = bob_client.post(url.format(pk=memory.pk), data)

    html = response.content.decode()
    assert response.status_code == 403
    assert "The editor role is needed" in html and "you are a viewer" in html
    memory.refresh_from_db()
    assert (memory.text, memory.pinned, memory.status) == ("Prefers terse answers.", False, "active")
    assert Memory.objects.count() == 1


def test_a_viewer_cannot_open_the_edit_form_and_htmx_gets_the_refusal_in_the_alerts(bob_client, memory):
    assert bob_client.get(f"/memories/{memory.pk}/edit/").status_code == 403

    response = bob_client.post(
        f"/memories/{memory.pk}/pin/", headers={"HX-Request": "true", "HX-Target": f"row-{memory.pk}"}
    )

    assert response.status_code == 403
    assert response["X-Memoryui-State"] == "invalid" and response["HX-Retarget"] == "#alerts"
    assert "<html" not in response.content.decode() and "editor role" in response.content.decode()


def test_an_editor_creates_pins_edits_and_tombstones_in_the_pages(erin_client, memory):
    created = erin_client.post(
        "/memories/new/", {"scope": "agent:main", "kind": "fact", "text": "Runs 1000 RTX 4070s.", "source": "manual"}
    )
    assert created.status_code == 302
    assert erin_client.post(f"/memories/{memory.pk}/pin/").status_code == 302
    assert erin_client.post(f"/memories/{memory.pk}/tombstone/", {"reason": "stale"}).status_code == 302

    memory.refresh_from_db()
    assert memory.pinned and memory.status == "tombstoned"
    assert memory.events.filter(actor="user:erin").count() == 2
    assert Memory.objects.filter(text="Runs 1000 RTX 4070s.").exists()


def test_hygiene_and_admin_pages_keep_to_their_roles(bob_client, erin_client, alice_client):
    assert bob_client.get("/duplicates/").status_code == 200
    assert bob_client.post("/duplicates/apply/", {"scope": "agent:main"}).status_code == 403
    assert bob_client.post("/tasks/decay/").status_code == 403
    assert bob_client.post("/indexes/verify/").status_code == 403
    assert bob_client.get("/recall/profiles/").status_code == 200
    assert erin_client.get("/recall/profiles/new/").status_code == 403
    assert erin_client.post("/recall/profiles/new/", {"name": "tuned"}).status_code == 403
    assert alice_client.get("/recall/profiles/new/").status_code == 200
    assert not RecallProfile.objects.filter(name="tuned").exists()


def test_golden_sets_are_read_by_viewers_and_changed_and_run_by_editors(bob_client, erin_client):
    golden = GoldenSet.objects.create(name="basics", scope="agent:main")

    page = bob_client.get(f"/recall/golden/{golden.pk}/").content.decode()
    assert "basics" in page and 'id="golden-run"' not in page and "Add a query" not in page
    assert bob_client.post("/recall/golden/", {"name": "mine", "scope": "agent:main"}).status_code == 403
    assert bob_client.get(f"/recall/golden/{golden.pk}/run/", {"a": "default"}).status_code == 403
    assert erin_client.post("/recall/golden/", {"name": "hers", "scope": "agent:main"}).status_code == 302
    assert erin_client.get(f"/recall/golden/{golden.pk}/run/", {"a": "default"}).status_code == 200
    assert list(GoldenSet.objects.values_list("name", flat=True)) == ["basics", "hers"]


def test_a_viewer_runs_recall_in_the_playground_but_cannot_save_it_as_a_trace(bob_client, recall_store):
    response = bob_client.get("/recall/", {"q": "phone number", "scope": "agent:main"})

    html = response.content.decode()
    assert response.status_code == 200 and "18600000000" in html
    assert 'data-action="save-trace"' not in html
    assert bob_client.post("/recall/traces/save/", {"payload": "x"}).status_code == 403


# --- the API -----------------------------------------------------------------------------------


def test_a_viewer_lists_and_reads_but_every_change_through_the_api_is_403(bob_client, memory):
    assert bob_client.get(MEMORIES).json()["count"] == 1
    assert bob_client.get(f"{MEMORIES}{memory.pk}/").status_code == 200
    for method, url, body in [
        ("post", MEMORIES, {"scope": "agent:main", "kind": "fact", "text": "A viewer wrote this."}),
        ("patch", f"{MEMORIES}{memory.pk}/", {"text": "Edited by a viewer."}),
        ("post", f"{MEMORIES}{memory.pk}/pin/", None),
        ("post", f"{MEMORIES}{memory.pk}/tombstone/", {"reason": "viewer"}),
        ("delete", f"{MEMORIES}{memory.pk}/", None),
        ("post", f"{MEMORIES}bulk/", {"action": "pin", "ids": [str(memory.pk)]}),
    ]:
        assert_forbidden(send(bob_client, method, url, body), "needs the editor role; you are a viewer")
    memory.refresh_from_db()
    assert (memory.text, memory.pinned, memory.status) == ("Prefers terse answers.", False, "active")
    assert Memory.objects.count() == 1


def test_an_editor_writes_through_the_api(erin_client, memory):
    created = send(
        erin_client, "post", MEMORIES, {"scope": "agent:main", "kind": "fact", "text": "Deploys on Tuesdays."}
    )
    edited = send(erin_client, "patch", f"{MEMORIES}{memory.pk}/", {"text": "Prefers very terse answers."})
    pinned = send(erin_client, "post", f"{MEMORIES}{memory.pk}/pin/")

    assert (created.status_code, edited.status_code, pinned.status_code) == (201, 200, 200)
    assert send(erin_client, "delete", f"{MEMORIES}{memory.pk}/").json()["status"] == "tombstoned"


def test_a_viewer_searches_and_recalls_through_the_api(bob_client, recall_store):
    found = bob_client.get("/api/search/", {"q": "18600000000", "scope": "agent:main"})
    recalled = send(bob_client, "post", "/api/recall/", {"query": "what is the phone number", "scope": "agent:main"})

    phone = str(recall_store["phone"].pk)
    assert found.status_code == 200
    assert phone in [hit["id"] for hit in found.json()["results"] + found.json()["below_floor"]]
    assert recalled.status_code == 200
    assert phone in [candidate["id"] for candidate in recalled.json()["candidates"]]


def test_a_read_token_is_refused_every_change_but_reads_and_recalls(erin, memory, recall_store):
    _, raw = ApiToken.issue(user=erin, name="reader", scopes=["agent:main"], access=ApiToken.Access.READ)
    reader = bearer(raw)

    for method, url, body in [
        ("post", MEMORIES, {"scope": "agent:main", "kind": "fact", "text": "A reader wrote this."}),
        ("patch", f"{MEMORIES}{memory.pk}/", {"text": "Edited by a reader."}),
        ("delete", f"{MEMORIES}{memory.pk}/", None),
        ("post", f"{MEMORIES}{memory.pk}/pin/", None),
    ]:
        assert_forbidden(send(reader, method, url, body), "read-only")
    assert reader.get(MEMORIES).status_code == 200
    recalled = send(reader, "post", "/api/recall/", {"query": "phone number", "scope": "agent:main"})
    assert recalled.status_code == 200
    memory.refresh_from_db()
    assert (memory.text, memory.status) == ("Prefers terse answers.", "active")


def test_a_write_token_whose_owner_became_a_viewer_only_reads(erin):
    _, raw = ApiToken.issue(user=erin, name="agent", scopes=["agent:main"], access=ApiToken.Access.WRITE)
    agent = bearer(raw)
    body = {"scope": "agent:main", "kind": "fact", "text": "Written while erin was an editor."}
    assert send(agent, "post", MEMORIES, body).status_code == 201

    roles.set_role(erin, roles.Role.VIEWER)

    later = {"scope": "agent:main", "kind": "fact", "text": "Written after erin became a viewer."}
    assert_forbidden(send(agent, "post", MEMORIES, later), "this token's owner is a viewer")
    assert agent.get(MEMORIES).json()["count"] == 1


def test_recall_profiles_are_changed_by_signed_in_admins_only(alice_client, erin_client, agent_token):
    body = {"name": "tuned", "knobs": {"candidates": 30}}

    assert_forbidden(send(erin_client, "post", PROFILES, body), "needs the admin role; you are an editor")
    assert_forbidden(send(erin_client, "patch", f"{PROFILES}default/", {"description": "x"}), "admin role")
    assert_forbidden(send(bearer(agent_token), "post", PROFILES, body), "sign in")
    assert erin_client.get(PROFILES).status_code == 200
    assert send(alice_client, "post", PROFILES, body).status_code == 201


def test_a_golden_run_needs_an_editor_but_no_write_token(bob_client, erin):
    golden = GoldenSet.objects.create(name="basics", scope="agent:main")
    _, raw = ApiToken.issue(user=erin, name="reader", scopes=["agent:main"], access=ApiToken.Access.READ)
    run = f"/api/recall/golden/{golden.pk}/run/"

    assert_forbidden(send(bob_client, "post", run, {}), "needs the editor role")
    assert send(bearer(raw), "post", run, {}).status_code == 200
    assert_forbidden(send(bearer(raw), "delete", f"/api/recall/golden/{golden.pk}/"), "read-only")
    assert GoldenSet.objects.filter(pk=golden.pk).exists()


def test_a_transcript_dry_run_is_open_to_viewers_and_extracting_is_not(bob_client, erin_client):
    transcript = ingest(
        {"scope": "agent:main", "messages": [{"role": "user", "content": "My name is Wang Wei."}]}
    ).transcript
    url = f"/api/transcripts/{transcript.pk}/extract/"

    dry = send(bob_client, "post", url, {"dry_run": True})
    assert dry.status_code == 200 and dry.json()["dry_run"] is True
    assert_forbidden(send(bob_client, "post", url, {}), "needs the editor role")
    assert_forbidden(
        send(bob_client, "post", "/api/transcripts/", {"scope": "agent:main", "messages": []}), "editor role"
    )
    assert send(erin_client, "post", url, {}).status_code == 202


def test_unknown_api_urls_stay_404_for_read_tokens(erin):
    _, raw = ApiToken.issue(user=erin, name="reader", scopes=["agent:main"], access=ApiToken.Access.READ)

    assert send(bearer(raw), "post", "/api/no-such-thing/", {}).status_code == 404


# --- one policy, the same words everywhere ------------------------------------------------------


def test_a_page_the_api_and_mcp_refuse_the_same_viewer_in_the_same_words(bob, bob_client):
    body = {"scope": "agent:main", "kind": "fact", "text": "A viewer wrote this.", "source": "manual"}
    said = "This needs the editor role; you are a viewer."
    token, key = ApiToken.issue(user=bob, name="bobs", scopes=["agent:main"], access=ApiToken.Access.WRITE)
    said_to_token = "This needs the editor role; this token's owner is a viewer."

    page = bob_client.post("/memories/new/", body)
    fragment = bob_client.post("/memories/new/", body, headers={"HX-Request": "true"})
    api = send(bob_client, "post", MEMORIES, body).json()["error"]
    api_by_token = send(bearer(key), "post", MEMORIES, body).json()["error"]
    with pytest.raises(roles.Forbidden) as refused:
        tools.remember(tools.Caller("agent:main", token), body["text"])
    mcp_status, mcp_body = tools.error_of(refused.value)

    assert (page.status_code, fragment.status_code, mcp_status) == (403, 403, 403)
    assert f"{said} Ask an admin to change your role." in page.content.decode()
    assert f"{said} Ask an admin to change your role." in fragment.content.decode()
    assert (api["message"], api["details"]) == (said, {"role": [said]})
    assert mcp_body == {"error": api_by_token}
    assert (api_by_token["message"], api_by_token["details"]) == (said_to_token, {"role": [said_to_token]})
    assert not Memory.objects.exists()


# --- minting tokens -----------------------------------------------------------------------------


def test_a_viewer_mints_read_tokens_for_named_scopes_only(bob_client):
    write = send(bob_client, "post", TOKENS, {"name": "w", "scopes": ["main"], "access": "write"})
    unscoped = send(bob_client, "post", TOKENS, {"name": "u", "access": "read"})
    read = send(bob_client, "post", TOKENS, {"name": "r", "scopes": ["main"]})

    assert assert_forbidden(write, "needs the editor role")["details"] == {"access": ["needs the editor role"]}
    assert assert_forbidden(unscoped, "needs the admin role")["details"] == {"scopes": ["needs the admin role"]}
    assert read.status_code == 201 and read.json()["access"] == "read"
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["r"]


def test_an_editor_mints_write_tokens_for_named_scopes_but_no_unscoped_one(erin_client):
    unscoped = send(erin_client, "post", TOKENS, {"name": "everything"})
    scoped = send(erin_client, "post", TOKENS, {"name": "agent", "scopes": ["main"]})

    assert_forbidden(unscoped, "A token for every scope needs the admin role; you are an editor")
    assert scoped.status_code == 201 and scoped.json()["access"] == "write"


def test_an_admin_mints_any_token(alice_client):
    response = send(alice_client, "post", TOKENS, {"name": "everything", "access": "read"})

    assert response.status_code == 201
    assert (response.json()["scopes"], response.json()["access"]) == ([], "read")


def test_the_tokens_page_refuses_a_token_above_the_role_with_a_form_error(bob_client, erin_client):
    write = bob_client.post("/tokens/", {"name": "w", "scopes": "main", "access": "write"})
    unscoped = erin_client.post("/tokens/", {"name": "u", "scopes": "", "access": "read"})
    read = bob_client.post("/tokens/", {"name": "r", "scopes": "main"})

    assert write.status_code == 403 and "<b>Access</b>: A write token needs the editor role" in write.content.decode()
    assert unscoped.status_code == 403 and "<b>Scopes</b>: A token for every scope needs the admin role" in (
        unscoped.content.decode()
    )
    assert read.status_code == 201
    assert list(ApiToken.objects.values_list("name", "access")) == [("r", "read")]
    assert "As a viewer you may create read tokens for named scopes" in bob_client.get("/tokens/").content.decode()


def test_the_command_line_mints_any_token_with_the_access_asked(bob):
    document = json.loads(run("api_token", "create", "ops", "--user", "bob", "--access", "read", "--json"))
    default = json.loads(run("api_token", "create", "agent", "--user", "bob", "--json"))

    assert (document["access"], document["scopes"]) == ("read", [])
    assert default["access"] == "write"  # the operator's: no role check, though bob's role still limits it
    assert ApiToken.objects.get(pk=document["id"]).access == "read"


# --- the back office -----------------------------------------------------------------------------


def test_the_back_office_refuses_an_editor_and_lets_an_admin_in(erin_client, django_user_model):
    assert erin_client.get("/admin/").status_code == 302
    signed_in = Client().post("/admin/login/", {"username": "erin", "password": "erin-password-1"})
    assert "your role is editor" in signed_in.content.decode()

    ops = django_user_model.objects.create_user("ops", password="ops-password-1")  # no staff flag, no superuser
    roles.set_role(ops, roles.Role.ADMIN)
    client = Client()
    assert client.post("/admin/login/", {"username": "ops", "password": "ops-password-1"}).status_code == 302
    assert client.get("/admin/").status_code == 200
    assert client.get("/admin/memoryui/memory/").status_code == 200
    assert client.get("/admin/auth/group/").status_code == 200


# --- commands -----------------------------------------------------------------------------------


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_set_role_moves_a_user_into_one_role_group(bob):
    document = json.loads(run("set_role", "bob", "editor", "--json"))
    assert document == {"username": "bob", "role": "editor", "previous": "viewer", "superuser_removed": False}
    assert roles.role_of(get_user_model().objects.get(username="bob")) is roles.Role.EDITOR

    run("set_role", "bob", "admin")
    bob = get_user_model().objects.get(username="bob")
    assert list(bob.groups.values_list("name", flat=True)) == ["admin"]


def test_set_role_below_admin_takes_the_superuser_status_away(alice):
    document = json.loads(run("set_role", "alice", "viewer", "--json"))

    alice.refresh_from_db()
    assert document["superuser_removed"] is True and not alice.is_superuser
    assert roles.role_of(alice) is roles.Role.VIEWER


@pytest.mark.parametrize(
    ("args", "says"), [(("nobody", "editor"), "No user named 'nobody'"), (("bob", "owner"), "not a role")]
)
def test_set_role_refuses_an_unknown_user_or_role_with_exit_code_1(bob, args, says):
    with pytest.raises(CommandError, match=says) as refused:
        run("set_role", *args)
    assert refused.value.returncode == 1
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("set_role", *args, "--json", stdout=out, stderr=io.StringIO())
    assert says in json.loads(out.getvalue())["error"]
    assert not get_user_model().objects.get(username="bob").groups.exists()


def test_bootstrap_makes_its_first_user_an_admin(tmp_path, settings, monkeypatch):
    settings.DATA_DIR = tmp_path
    monkeypatch.delenv("MEMORYUI_ADMIN_PASSWORD", raising=False)
    monkeypatch.setattr("web.demo.seed_clean", lambda: 0)
    monkeypatch.setattr("web.demo.seed_polluted", lambda: 0)

    call_command("bootstrap", "--json", stdout=io.StringIO(), stderr=io.StringIO())

    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and list(admin.groups.values_list("name", flat=True)) == ["admin"]
    assert roles.role_of(admin) is roles.Role.ADMIN


# --- the migration ------------------------------------------------------------------------------


def test_existing_users_keep_what_they_could_do_superusers_admin_staff_editor(django_user_model, alice, bob):
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    already = django_user_model.objects.create_user("already", is_staff=True)
    already.groups.add(Group.objects.get(name="viewer"))
    alice.groups.clear()

    moved = roles.assign_existing_users(apps)

    assert moved == {"admin": 1, "editor": 1}
    assert list(alice.groups.values_list("name", flat=True)) == ["admin"]
    assert list(staff.groups.values_list("name", flat=True)) == ["editor"]
    assert list(already.groups.values_list("name", flat=True)) == ["viewer"]  # a role given is kept
    assert not bob.groups.exists()


def test_each_group_holds_the_django_permissions_of_its_role():
    Group.objects.filter(name__in=roles.ROLE_NAMES).delete()

    roles.sync_groups(apps)

    def perms(name: str) -> set[str]:
        group = Group.objects.get(name=name)
        return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}

    viewer, editor, admin = perms("viewer"), perms("editor"), perms("admin")
    assert {"memoryui.view_memory", "recall.view_recallprofile"} <= viewer
    assert not any(p.split(".")[1].startswith(("add_", "change_", "delete_")) for p in viewer)
    assert {"memoryui.change_memory", "memoryui.add_transcript", "recall.change_goldenset"} <= editor
    assert viewer <= editor
    assert not {"memoryui.add_apitoken", "recall.change_recallprofile", "auth.change_user"} & editor
    assert {"memoryui.add_apitoken", "recall.change_recallprofile", "auth.change_user", "auth.change_group"} <= admin
    assert editor <= admin
