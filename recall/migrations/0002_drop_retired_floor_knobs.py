"""Drop the scope-relative floor knobs from stored profiles: the answerability decision replaced them."""

from django.db import migrations

RETIRED = ("vector_floor", "vector_margin", "bm25_floor", "bm25_coverage", "fused_floor")


def drop_retired_knobs(apps, schema_editor):
    RecallProfile = apps.get_model("recall", "RecallProfile")
    for profile in RecallProfile.objects.all():
        knobs = profile.knobs or {}
        dropped = [name for name in RETIRED if name in knobs]
        if not dropped:
            continue
        profile.knobs = {name: value for name, value in knobs.items() if name not in RETIRED}
        note = f"Retired knobs dropped on upgrade: {', '.join(f'{n}={knobs[n]}' for n in dropped)}."
        profile.description = f"{profile.description}\n{note}".strip()
        profile.save(update_fields=["knobs", "description"])


class Migration(migrations.Migration):
    dependencies = [("recall", "0001_initial")]

    operations = [migrations.RunPython(drop_retired_knobs, migrations.RunPython.noop)]
