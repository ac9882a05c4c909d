"""The back office shows the index bookkeeping read-only: the app alone writes it."""

from __future__ import annotations

import pytest

from memoryui.models import IndexCheck

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", ["indexoutbox", "indexcheck", "pendingvector"])
def test_bookkeeping_lists_render_and_offer_no_add(alice_client, make_memory, model):
    make_memory("Deploys go out on Fridays.", kind="procedure")  # leaves an outbox row
    IndexCheck.objects.create(action="verify", actor="test", ok=True)
    response = alice_client.get(f"/admin/memoryui/{model}/")
    assert response.status_code == 200
    assert alice_client.get(f"/admin/memoryui/{model}/add/").status_code == 403
