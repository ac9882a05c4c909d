"""PostgreSQL lexical entries of layout 1 gain their scope's lexeme in `tokens` (layout 2).

The lexeme is written here as `searchindex.lexical_postgres.scope_lexeme` wrote it when this
migration was made (a space, "scope:", the scope), and the fingerprint gains the layout mark that
`PostgresLexicalIndex.entry_fingerprint` adds, so verify finds these entries up to date. On
SQLite the table is always empty: there is nothing to do.
"""

from django.db import migrations

TABLE = "memoryui_lexicalentry"


def add_scope_lexemes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"UPDATE {TABLE} SET tokens = tokens || array_to_tsvector(ARRAY[' scope:' || scope]), "
        "fingerprint = fingerprint || '.l2' WHERE fingerprint NOT LIKE '%%.l2'"
    )


def remove_scope_lexemes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"UPDATE {TABLE} SET tokens = ts_delete(tokens, ' scope:' || scope), "
        "fingerprint = left(fingerprint, -3) WHERE fingerprint LIKE '%%.l2'"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("memoryui", "0012_outbox_run"),
    ]

    operations = [
        migrations.RunPython(add_scope_lexemes, remove_scope_lexemes, elidable=False),
    ]
