"""The default profile's stored description is brought in line with what the profiles page says."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from recall.models import DEFAULT_DESCRIPTION, DEFAULT_PROFILE, RecallProfile

pytestmark = pytest.mark.django_db
migration = importlib.import_module("recall.migrations.0009_default_profile_description")


def test_the_old_description_of_the_default_profile_is_replaced_and_an_edited_one_kept():
    RecallProfile.objects.create(name=DEFAULT_PROFILE, description=migration.OLD)
    RecallProfile.objects.create(name="strict", description=migration.OLD)
    migration.forwards(apps, None)
    assert RecallProfile.objects.get(name=DEFAULT_PROFILE).description == DEFAULT_DESCRIPTION == migration.NEW
    assert RecallProfile.objects.get(name="strict").description == migration.OLD  # not the default: not ours
    RecallProfile.objects.filter(name=DEFAULT_PROFILE).update(description="Ours, tuned for support chats.")
    migration.forwards(apps, None)
    assert RecallProfile.objects.get(name=DEFAULT_PROFILE).description == "Ours, tuned for support chats."
    migration.backwards(apps, None)
    assert RecallProfile.objects.get(name=DEFAULT_PROFILE).description == "Ours, tuned for support chats."


def test_a_new_store_gets_the_new_description():
    assert RecallProfile.objects.resolve(None).description == DEFAULT_DESCRIPTION
