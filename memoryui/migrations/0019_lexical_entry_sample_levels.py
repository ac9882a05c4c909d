"""PostgreSQL lexical entries of layout 2 gain their sample levels' lexemes in `tokens` (layout 3).

An entry holds ' sample:1' to ' sample:L', and the same within its scope (' sample:1 scope:S' to
' sample:L scope:S'), where L is the number of leading zero bits in the first
16 bits of the MD5 of its memory id's text, as `searchindex.lexical.sample_level` computed it and
`searchindex.lexical_postgres.sample_lexeme` named it when this migration was made. The fingerprint
gains the layout mark `PostgresLexicalIndex.entry_fingerprint` adds, so verify finds these entries up
to date. On SQLite the table is always empty: there is nothing to do.
"""

from django.db import migrations

TABLE = "memoryui_lexicalentry"
LEVELS = 16
# The sample level of each entry: the zeros before the first one bit of its id's MD5, up to 16.
LEVEL = f"{LEVELS} - length(ltrim((('x' || substr(md5(memory_id::text), 1, 4))::bit({LEVELS}))::text, '0'))"


def sample_lexemes(up_to: str) -> str:
    """The entry's sample lexemes of levels 1 to `up_to` (an SQL expression), plain and within its scope."""
    return (
        f"ARRAY(SELECT lexeme FROM generate_series(1, {up_to}) AS level, "
        "LATERAL (VALUES (' sample:' || level), (' sample:' || level || ' scope:' || scope)) AS sample(lexeme))"
    )


def add_sample_levels(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"UPDATE {TABLE} SET tokens = tokens || array_to_tsvector({sample_lexemes(LEVEL)}), "
        "fingerprint = left(fingerprint, -3) || '.l3' WHERE fingerprint LIKE '%%.l2'"
    )


def remove_sample_levels(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"UPDATE {TABLE} SET tokens = ts_delete(tokens, {sample_lexemes(str(LEVELS))}), "
        "fingerprint = left(fingerprint, -3) || '.l2' WHERE fingerprint LIKE '%%.l3'"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("memoryui", "0018_indexcheck_tune"),
    ]

    operations = [
        migrations.RunPython(add_sample_levels, remove_sample_levels, elidable=False),
    ]
