import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models


class AddIndexOnPostgreSQL(migrations.AddIndex):
    """A GIN index exists on PostgreSQL only; on SQLite the (unused) table goes without it."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [
        ("memoryui", "0010_field_labels_and_plurals"),
    ]

    operations = [
        migrations.CreateModel(
            name="LexicalEntry",
            fields=[
                ("memory_id", models.UUIDField(primary_key=True, serialize=False)),
                ("scope", models.CharField(max_length=200)),
                ("fingerprint", models.CharField(max_length=80)),
                ("tokens", django.contrib.postgres.search.SearchVectorField()),
                ("lexemes", django.contrib.postgres.fields.ArrayField(base_field=models.TextField(), size=None)),
                (
                    "text_frequencies",
                    django.contrib.postgres.fields.ArrayField(base_field=models.FloatField(), size=None),
                ),
                ("field_scores", django.contrib.postgres.fields.ArrayField(base_field=models.FloatField(), size=None)),
                ("text_length", models.PositiveIntegerField()),
            ],
            options={
                "verbose_name": "lexical index entry",
                "verbose_name_plural": "lexical index entries",
                "indexes": [models.Index(fields=["scope"], name="lexical_scope")],
            },
        ),
        AddIndexOnPostgreSQL(
            model_name="lexicalentry",
            index=django.contrib.postgres.indexes.GinIndex(fields=["tokens"], name="lexical_tokens"),
        ),
    ]
