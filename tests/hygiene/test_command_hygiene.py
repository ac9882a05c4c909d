"""dedup, cleanup_legacy and undo on the command line: one JSON document with counts per action,
dry runs that change nothing, and clear errors."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from memoryui.models import Memory, MemoryEvent, TaskRun
from web import demo

pytestmark = pytest.mark.django_db


def run(command: str, *args) -> dict:
    out = io.StringIO()
    call_command(command, *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def fails(command: str, *args) -> tuple[str, dict]:
    out = io.StringIO()
    with pytest.raises(CommandError) as error:
        call_command(command, *args, "--json", stdout=out)
    return str(error.value), json.loads(out.getvalue())


@pytest.fixture
def polluted(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    demo.seed_polluted()


def test_dedup_dry_run_lists_the_clusters_and_merging_then_undo_round_trips(polluted):
    events = MemoryEvent.objects.count()
    dry = run("dedup", "--scope", "main", "--dry-run")  # a bare agent id is normalized
    assert (dry["scope"], dry["dry_run"], dry["merged"]) == ("agent:main", True, 0)
    assert dry["by_layer"]["exact"] == 5  # the prompt x5 and the four repeated notes x2
    assert dry["would_merge"] == 8
    assert MemoryEvent.objects.count() == events

    applied = run("dedup", "--scope", "agent:main")
    assert (applied["merged"], applied["clusters"]) == (8, 5)
    assert Memory.objects.active().filter(scope="agent:main").count() == 73
    assert TaskRun.objects.get(kind="dedup").status == "succeeded"

    undone = run("undo", applied["batch"])
    assert (undone["restored"], undone["reverted"]) == (8, 5)
    assert Memory.objects.active().filter(scope="agent:main").count() == 81


def test_cleanup_legacy_reports_counts_per_step_and_the_batches_to_undo(polluted):
    dry = run("cleanup_legacy", "--scope", "agent:main", "--dry-run")
    assert dry["dry_run"] and dry["batches"] == []
    assert [step["step"] for step in dry["steps"]] == ["snapshot", "internal", "extract", "demote"]
    assert Memory.objects.active().count() == 85

    applied = run("cleanup_legacy", "--scope", "agent:main")
    assert applied["counts"]["extract"]["typed_added"] == dry["counts"]["extract"]["typed_added"] >= 4
    assert applied["counts"]["internal"] == dry["counts"]["internal"]
    assert len(applied["batches"]) == 3
    assert TaskRun.objects.filter(kind="cleanup", status="succeeded").count() == 4

    one = run("cleanup_legacy", "--scope", "agent:main", "--step", "internal")
    assert one["counts"] == {"internal": {}} and one["batches"] == []


@pytest.mark.parametrize(
    ("command", "args", "message"),
    [
        ("dedup", ["--scope", "agent:main", "--threshold", "1.5"], "--threshold: must be above 0 and at most 1"),
        ("dedup", ["--scope", "agent:"], "--scope:"),
        ("dedup", ["--scope", "agent:main", "--dry-run", "--background"], "--dry-run runs in the foreground"),
        ("cleanup_legacy", ["--scope", "agent:main", "--background"], "--background runs one step at a time"),
        ("undo", ["f00"], "'f00' is not a batch id"),
    ],
)
def test_bad_arguments_fail_with_one_json_error(command, args, message):
    error, document = fails(command, *args)
    assert message in error
    assert document == {"error": error}


def test_background_runs_are_queued_as_tasks(polluted, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        queued = run("cleanup_legacy", "--scope", "agent:main", "--step", "internal", "--background")
    run_ = TaskRun.objects.get(pk=queued["task_id"])
    assert (run_.kind, run_.status) == ("cleanup", "succeeded")  # tasks run inline in unit tests
    assert run_.result["counts"]["tombstone"] > 60
