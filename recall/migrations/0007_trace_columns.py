"""Traces get the columns their list filters on (answered, latency_ms, block_size), read from each
trace's stored `result` JSON. The reading is a copy of recall.models.trace_columns as it was when
this migration was written, so later changes to the model cannot change what it does."""

from __future__ import annotations

from django.db import migrations, models

BATCH = 500


def columns_of(result) -> dict:
    """The columns of a trace whose recall JSON is `result` (RecallResult.to_dict)."""
    result = result if isinstance(result, dict) else {}
    answer = result.get("answer")
    total = (result.get("timings_ms") or {}).get("total")
    timed = isinstance(total, int | float) and not isinstance(total, bool)
    return {
        "answered": bool(answer.get("answered", True)) if isinstance(answer, dict) else True,
        "latency_ms": round(float(total), 2) if timed else None,
        "block_size": len(result.get("selected") or []),
    }


def fill_columns(trace) -> None:
    """Set one trace row's columns from its `result`."""
    for name, value in columns_of(trace.result).items():
        setattr(trace, name, value)


def back_fill(apps, schema_editor) -> None:
    RecallTrace = apps.get_model("recall", "RecallTrace")
    changed = []
    for trace in RecallTrace.objects.only("pk", "result").iterator(chunk_size=BATCH):
        fill_columns(trace)
        changed.append(trace)
        if len(changed) >= BATCH:
            RecallTrace.objects.bulk_update(changed, ["answered", "latency_ms", "block_size"])
            changed = []
    RecallTrace.objects.bulk_update(changed, ["answered", "latency_ms", "block_size"])


class Migration(migrations.Migration):
    dependencies = [
        ("recall", "0006_trace_source_mcp"),
    ]

    operations = [
        migrations.AddField(
            model_name="recalltrace",
            name="answered",
            field=models.BooleanField(
                default=True, help_text="the answerability decision: false when recall stayed silent"
            ),
        ),
        migrations.AddField(
            model_name="recalltrace",
            name="latency_ms",
            field=models.FloatField(blank=True, help_text="the whole recall, in milliseconds", null=True),
        ),
        migrations.AddField(
            model_name="recalltrace",
            name="block_size",
            field=models.PositiveSmallIntegerField(default=0, help_text="how many memories the agent was handed"),
        ),
        # Going back drops the columns, so there is nothing to undo.
        migrations.RunPython(back_fill, migrations.RunPython.noop, elidable=True),
    ]
