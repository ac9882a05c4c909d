"""Transcripts are named by the agent's own id within their scope (`external_id`); a transcript
stored before keeps its UUID as that id, so re-posting it with the id it was posted with finds it."""

from django.db import migrations, models


def external_ids_from_pk(apps, schema_editor):
    Transcript = apps.get_model("memoryui", "Transcript")
    for transcript in Transcript.objects.filter(external_id="").only("pk").iterator():
        Transcript.objects.filter(pk=transcript.pk).update(external_id=str(transcript.pk))


class Migration(migrations.Migration):
    dependencies = [("memoryui", "0007_json_decoder")]

    operations = [
        migrations.AddField(
            model_name="transcript",
            name="external_id",
            field=models.CharField(default="", max_length=200),
            preserve_default=False,
        ),
        migrations.RunPython(external_ids_from_pk, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="transcript",
            name="external_id",
            field=models.CharField(
                help_text="the agent's own id for it (a session id), unique in its scope", max_length=200
            ),
        ),
        migrations.AddConstraint(
            model_name="transcript",
            constraint=models.UniqueConstraint(fields=("scope", "external_id"), name="transcript_unique_external_id"),
        ),
    ]
