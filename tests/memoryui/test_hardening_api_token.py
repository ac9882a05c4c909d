"""`manage.py api_token create` prints the key alone on standard output (a script captures it and
nothing else), and which token it is and the advice to store the key on standard error."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from memoryui.models import ApiToken

pytestmark = pytest.mark.django_db


def create(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("api_token", "create", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_standard_output_holds_the_key_alone_on_its_line(alice):
    out, _ = create("agent", "--user", "alice", "--scope", "main")

    assert out.endswith("\n") and out.count("\n") == 1
    key = out.strip()
    assert key.startswith("mui_") and " " not in key
    assert ApiToken.authenticate(key).name == "agent"


def test_which_token_it_is_and_the_advice_go_to_standard_error_each_on_a_line_of_its_own(alice):
    out, err = create("agent", "--user", "alice", "--scope", "main", "--access", "read")

    token = ApiToken.objects.get(name="agent")
    assert err.splitlines() == [
        f"Token {token.pk} 'agent' for alice (agent:main, read):",
        "Store the key now: it is not shown again.",
    ]
    assert out.strip() not in err
