"""PostgreSQL keeps statistics on the lexical entries' `tokens` for ten times more lexemes (target 1000).

Above its exact line, the BM25 index in PostgreSQL takes a term's document frequency from the
column's most common elements (pg_stats) and counts the others, one row read per memory holding
the term. At the default target (100) the list stops at the 1,000 most common lexemes: at 1M
memories, terms held by 140 to 2,400 memories were counted with the search (3 ms each, 80 ms for a
query of six Chinese bigrams of one name). At 1000, ANALYZE samples 300,000 rows and lists every
lexeme down to about 140 memories of 1M (bench/scale.py's store: 2,615 lexemes; ANALYZE 7.6 s). On
SQLite the table is unused: there is nothing to do.
"""

from django.db import migrations

TABLE = "memoryui_lexicalentry"
TARGET = 1000


def set_target(target: int):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN tokens SET STATISTICS {target}")

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("memoryui", "0019_lexical_entry_sample_levels"),
    ]

    operations = [
        migrations.RunPython(set_target(TARGET), set_target(-1), elidable=False),
    ]
