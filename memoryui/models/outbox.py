"""The index outbox and what the search indexes' bookkeeping keeps in the database.

The database is the source of truth; the search indexes (the `searchindex` app, which has no
models of its own) are derived from it. A change to a memory writes an IndexOutbox row in its
own transaction and, once that commits, `outbox_committed` is sent: the indexes listen. An index
kept in step inside that transaction (the PostgreSQL lexical index, LexicalEntry) listens to
`index_entries_due`, sent while the transaction is still open.
"""

from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models, transaction
from django.dispatch import Signal
from django.utils import timezone

from memoryui import rules
from memoryui.models.fields import StoredJSONDecoder
from memoryui.models.taskrun import TaskRun


class IndexOutbox(models.Model):
    """Memories whose search-index entries may be out of date.

    A row is written in the same transaction as the change to the memory and removed once
    both indexes hold the new state; after commit a task is enqueued to do that. A crash
    between the commit and the index write leaves the row behind: it is visible as pending
    and `reindex` finishes the work.
    """

    memory_id = models.UUIDField(primary_key=True)
    queued_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    # A bulk import's embedding run that will sync this row's vector (its BM25 entry was written
    # before the import answered): the sweep and the syncs of other writes leave it to that run
    # while it runs. A newer change of the memory clears it (the row is then an ordinary one).
    run = models.ForeignKey(TaskRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The scopes the memory moved out of since its entries were last synced: the vector index keeps
    # one collection per scope, and the sync removes the memory from these ones only instead of
    # asking every scope's collection for it. Every one is kept, not only the first: a sync that
    # ran between two moves may have left the memory in the middle scope.
    moved_from_scopes = models.JSONField(decoder=StoredJSONDecoder, default=list, blank=True)

    class Meta:
        verbose_name = "index outbox entry"
        verbose_name_plural = "index outbox entries"
        ordering = ["queued_at"]

    def __str__(self) -> str:
        return f"index sync pending for {self.memory_id}"


class PendingVector(models.Model):
    """A new memory's passage vector, computed by the write path for dedup layer 3.

    It waits here for the index sync, usually in another process, which then need not embed
    the same text again; the sync uses it only while the memory still has this content hash
    and the vector index this embedder, and deletes it once done.
    """

    memory_id = models.UUIDField(primary_key=True)
    embedder = models.CharField(max_length=200)
    content_hash = models.CharField(max_length=64)
    vector = models.BinaryField()  # little-endian float32
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.embedder} vector of {self.memory_id}"


class LexicalEntry(models.Model):
    """One active memory's BM25 entry when the lexical index lives in PostgreSQL (MEMORYUI_LEXICAL=postgres).

    Derived data, like the whoosh files it replaces: `searchindex.lexical_postgres` writes it in the
    memory's own transaction and searches it. `tokens`, the GIN-indexed tsvector, holds the memory's
    distinct tokens exactly as `searchindex.tokens.tokenize` emits them (never re-parsed by a
    text-search configuration) and one lexeme naming its scope, and selects candidates; `lexemes`
    lists the same tokens with, at the same positions, their frequency in the text and the score of
    their matches in the entity key and tags, which rank the candidates without unpacking the
    tsvector. The GIN index exists on PostgreSQL only: on SQLite the table is created and stays
    empty.
    """

    memory_id = models.UUIDField(primary_key=True)
    scope = models.CharField(max_length=rules.SCOPE_MAX_LENGTH)
    fingerprint = models.CharField(max_length=80)  # what an up-to-date entry holds (verify compares it)
    tokens = SearchVectorField()
    lexemes = ArrayField(models.TextField())
    text_frequencies = ArrayField(models.FloatField())
    field_scores = ArrayField(models.FloatField())  # BM25 of the key and tags matches, length-free
    text_length = models.PositiveIntegerField()  # tokens in the text: BM25's length normalisation

    class Meta:
        verbose_name = "lexical index entry"
        verbose_name_plural = "lexical index entries"
        indexes = [
            models.Index(fields=["scope"], name="lexical_scope"),
            GinIndex(fields=["tokens"], name="lexical_tokens"),
        ]

    def __str__(self) -> str:
        return f"lexical entry of {self.memory_id}"


class IndexCheck(models.Model):
    """One verify, repair, rebuild or tune of the search indexes: who ran it, when, what it found."""

    class Action(models.TextChoices):
        VERIFY = "verify"
        REPAIR = "repair"
        REBUILD = "rebuild"
        TUNE = "tune"  # the vector index's recall measured and its ef_search set (searchindex.tuning)

    action = models.CharField(max_length=10, choices=Action.choices)
    actor = models.CharField(max_length=200)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(
        null=True,
        help_text="verify: every index matches the database; tune: each scope reached its recall; else: it finished",
    )
    result = models.JSONField(decoder=StoredJSONDecoder, default=dict, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["action", "-started_at"], name="indexcheck_action_started")]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor} at {self.started_at:%Y-%m-%d %H:%M}"


_held = threading.local()


class HeldAnnouncements:
    """The memory ids whose outbox rows were written while `announcements_held` was in force."""

    def __init__(self):
        self.ids: list[str] = []


@contextmanager
def announcements_held():
    """Write outbox rows as ever, but announce none of them after commit: collect their ids instead.

    A bulk import syncs what it wrote itself (the BM25 index at once, the vectors in batches over
    the workers), so the per-transaction `sync_index` would only do the same work twice. The rows
    stay until that work is done, so nothing is lost if it never is: the sweep and `reindex`
    finish it.
    """
    held = HeldAnnouncements()
    outer = getattr(_held, "current", None)
    _held.current = held
    try:
        yield held
    finally:
        _held.current = outer


#: Sent once a transaction that wrote IndexOutbox rows has committed, with `memory_ids`. The
#: search indexes (searchindex.tasks.enqueue_sync) listen: the store tells the index what
#: changed without importing it.
outbox_committed = Signal()

#: Sent inside the transaction that changed these memories (`memory_ids`), before it commits: an
#: index written in the same transaction (searchindex.lexical_postgres) is never behind, and
#: a rollback undoes its write with the change.
index_entries_due = Signal()


def queue_index_sync(memory_ids, *, memories=None, moved_from: dict | None = None) -> None:
    """Record in the outbox that these memories' index entries must be refreshed; announce them after commit.

    `memories`, the saved Memory objects of these ids when the caller has them, spare an index
    written in this transaction from reading them back. `moved_from` maps the id of a memory whose
    scope this change moved to the scope it left: the row keeps it until the sync is done.
    """
    ids = [uuid.UUID(str(pk)) for pk in memory_ids]
    if not ids:
        return
    now = timezone.now()
    IndexOutbox.objects.bulk_create(
        [IndexOutbox(memory_id=pk, queued_at=now, run=None) for pk in ids],
        update_conflicts=True,
        unique_fields=["memory_id"],
        update_fields=["queued_at", "run"],
    )
    if moved_from:
        _record_moves({uuid.UUID(str(pk)): scope for pk, scope in moved_from.items() if scope})
    index_entries_due.send(sender=IndexOutbox, memory_ids=[str(pk) for pk in ids], memories=memories)
    held = getattr(_held, "current", None)
    if held is not None:
        held.ids.extend(str(pk) for pk in ids)
        return
    # One announcement per transaction, however many writes it holds, so the indexes can sync
    # them in batches. Ids of writes undone by a savepoint rollback may ride along: a sync
    # reads the database, so they are no-ops.
    connection = transaction.get_connection()
    if connection.in_atomic_block:
        for _savepoints, callback, _robust in reversed(connection.run_on_commit):
            if isinstance(callback, _OutboxCommitted) and not callback.done:
                callback.ids.extend(str(pk) for pk in ids)
                return
    # robust: a receiver that fails (a broker that is down) must not turn a committed change
    # into an error page; the outbox row stays and `reindex` (or the next sync) finishes the work.
    transaction.on_commit(_OutboxCommitted([str(pk) for pk in ids]), robust=True)


def _record_moves(moved_from: dict[uuid.UUID, str]) -> None:
    """Add each memory's old scope to its outbox row's `moved_from_scopes` (rows just written).

    Moves are rare, so a row at a time: the list grows by merging with what the row already
    holds, which one bulk statement cannot do on both databases.
    """
    with transaction.atomic():
        for row in IndexOutbox.objects.select_for_update().filter(memory_id__in=list(moved_from)):
            scope = moved_from[row.memory_id]
            if scope not in row.moved_from_scopes:
                row.moved_from_scopes = [*row.moved_from_scopes, scope]
                row.save(update_fields=["moved_from_scopes"])


class _OutboxCommitted:
    """The after-commit callback that announces a transaction's outbox rows (once per transaction)."""

    def __init__(self, ids: list[str]):
        self.ids = ids
        self.done = False
        self.__qualname__ = "index sync"  # Django names a failing robust callback by it

    def __call__(self) -> None:
        self.done = True
        outbox_committed.send(sender=IndexOutbox, memory_ids=list(dict.fromkeys(self.ids)))
