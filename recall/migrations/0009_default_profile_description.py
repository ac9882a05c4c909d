"""The default profile's description says what it is, not what it was tuned for: it said "calibrated
for the default embedder" while the profiles page said "not calibrated" beside it."""

from django.db import migrations

OLD = "The built-in knobs, calibrated for the default embedder."
NEW = "The built-in knobs: every recall uses them unless it names another profile."


def forwards(apps, schema_editor):
    apps.get_model("recall", "RecallProfile").objects.filter(name="default", description=OLD).update(description=NEW)


def backwards(apps, schema_editor):
    apps.get_model("recall", "RecallProfile").objects.filter(name="default", description=NEW).update(description=OLD)


class Migration(migrations.Migration):
    dependencies = [("recall", "0008_recall_log")]

    operations = [migrations.RunPython(forwards, backwards)]
