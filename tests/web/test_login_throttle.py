"""Sign-in lockout (django-axes): five wrong passwords lock one username from one address.

The limit is MEMORYUI_LOGIN_FAILURE_LIMIT (5 here, the default) and the wait
MEMORYUI_LOGIN_COOLOFF_MINUTES (15). alice is the one guessed at; bob signs in beside her.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django.utils import timezone

LOGIN = "/accounts/login/"


@pytest.fixture(autouse=True)
def _default_limits(settings):
    settings.AXES_FAILURE_LIMIT = 5
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


def sign_in(client: Client, username: str, password: str, address: str = "127.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def signed_in_as(client: Client) -> str | None:
    response = client.get("/")
    return response.context["user"].username if response.status_code == 200 else None


def guess(client: Client, username: str, times: int, address: str = "127.0.0.1") -> None:
    for i in range(times):
        sign_in(client, username, f"wrong-{i}", address)


def test_six_wrong_passwords_then_the_right_one_is_refused_with_the_lockout_page(client, alice):
    guess(client, "alice", 6)

    response = sign_in(client, "alice", "alice-password-1")

    assert response.status_code == 429
    html = response.content.decode()
    assert 'data-state="locked-out"' in html
    assert "Too many failed sign-ins for <b>alice</b>" in html
    assert "Try again in 15 minutes" in html
    assert response["Retry-After"] == str(15 * 60)
    assert signed_in_as(client) is None


def test_four_wrong_passwords_still_let_the_right_one_in_and_it_clears_them(client, alice):
    guess(client, "alice", 4)
    assert sign_in(client, "alice", "alice-password-1").status_code == 302
    client.logout()

    guess(client, "alice", 4)  # counted afresh after the success
    assert sign_in(client, "alice", "alice-password-1").status_code == 302
    assert signed_in_as(client) == "alice"


def test_another_user_from_the_same_address_is_not_locked(client, alice, bob):
    guess(client, "alice", 6)

    response = sign_in(client, "bob", "bob-password-1")

    assert response.status_code == 302
    assert signed_in_as(client) == "bob"


def test_the_same_user_from_another_address_is_not_locked(client, alice):
    guess(client, "alice", 6, address="203.0.113.7")

    assert sign_in(client, "alice", "alice-password-1", address="198.51.100.2").status_code == 302


def test_after_the_cool_off_the_right_password_works_again(client, alice):
    guess(client, "alice", 6)
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))

    assert sign_in(client, "alice", "alice-password-1").status_code == 302
    assert signed_in_as(client) == "alice"


def test_with_no_cool_off_the_lock_holds_until_an_admin_lifts_it(client, alice, settings):
    settings.AXES_COOLOFF_TIME = None  # MEMORYUI_LOGIN_COOLOFF_MINUTES=0
    guess(client, "alice", 6)
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(days=30))

    response = sign_in(client, "alice", "alice-password-1")

    assert response.status_code == 429
    assert "manage.py axes_reset_username alice" in response.content.decode()
    assert "Retry-After" not in response


def test_the_admin_sign_in_is_locked_the_same_way(client, alice):
    for i in range(6):
        client.post("/admin/login/", {"username": "alice", "password": f"wrong-{i}"})

    response = client.post("/admin/login/", {"username": "alice", "password": "alice-password-1"})

    assert response.status_code == 429
    assert 'data-state="locked-out"' in response.content.decode()


def test_a_locked_out_user_keeps_her_api_token_and_her_session(client, alice, alice_client, agent_token):
    guess(client, "alice", 6)

    assert client.get("/api/memories/", HTTP_AUTHORIZATION=f"Bearer {agent_token}").status_code == 200
    assert alice_client.get("/api/memories/").status_code == 200  # signed in before: not thrown out
