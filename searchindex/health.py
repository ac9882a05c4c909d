"""Index health: how each search index compares with the database, and a record of every check.

`status()` is cheap (entry counts, the outbox, the last check) and backs the dashboard panel;
`verify()`, `repair()` and `rebuild()` compare the indexes with the database and fix them;
`tune()` measures each big scope's vector recall and gives it the ef_search it needs
(searchindex/tuning.py); `run()` verifies, repairs, rebuilds or tunes and records an IndexCheck,
whoever asked: the dashboard, `manage.py reindex` or a task.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.db.models import Min
from django.utils import timezone

from memoryui.models import IndexCheck, IndexOutbox, Memory
from searchindex.documents import IndexedMemory, IndexUnavailable
from searchindex.indexes import CHUNK, INDEX_NAMES, drained_by_outbox, engine, get_index
from searchindex.outbox import sync_memories
from searchindex.tuning import due
from searchindex.tuning import tune as tune_scopes
from searchindex.vector import EmbedderMismatch

logger = logging.getLogger(__name__)

# Memories a rebuild indexes per sync. The vector index writes each scope's share of a chunk in
# calls of its own, and a chromadb call costs the same for 13 memories as for 256 (the HNSW work
# aside): over 20 scopes, chunks of 500 left most scopes a couple of dozen memories a call.
REBUILD_CHUNK = 5000


@dataclass
class IndexStatus:
    name: str
    engine: str = ""  # what serves it as configured (shown also when it is unavailable)
    entries: int | None = None
    info: dict = field(default_factory=dict)
    error: str = ""
    mismatch: EmbedderMismatch | None = None  # the vector index was built with another embedder

    def in_step_with(self, database: int) -> bool:
        return not self.error and self.entries == database


@dataclass
class Health:
    database: int
    indexes: list[IndexStatus]
    pending: int
    pending_since: object  # datetime | None
    failing: int  # pending rows that already failed at least once
    last_error: str
    last_check: IndexCheck | None
    last_verify: IndexCheck | None

    @property
    def ok(self) -> bool:
        return not self.pending and all(status.in_step_with(self.database) for status in self.indexes)


def status() -> Health:
    """Counts per index beside the database's, pending work, and the last checks (no full scan)."""
    indexes = []
    for name in INDEX_NAMES:
        entry = IndexStatus(name=name, engine=engine(name))
        try:
            opened = get_index(name)
            entry.entries = opened.count()
            entry.info = _info(name, opened)
        except EmbedderMismatch as exc:
            entry.error, entry.mismatch = str(exc), exc
        except IndexUnavailable as exc:
            entry.error = str(exc)
        indexes.append(entry)
    outbox = IndexOutbox.objects.aggregate(since=Min("queued_at"))
    failing = IndexOutbox.objects.filter(attempts__gt=0)
    last_failure = failing.order_by("-queued_at").values_list("last_error", flat=True).first()
    return Health(
        database=Memory.objects.active().count(),
        indexes=indexes,
        pending=IndexOutbox.objects.count(),
        pending_since=outbox["since"],
        failing=failing.count(),
        last_error=last_failure or "",
        last_check=IndexCheck.objects.first(),
        last_verify=IndexCheck.objects.filter(action=IndexCheck.Action.VERIFY).first(),
    )


def _info(name: str, opened) -> dict:
    if name == "vector":
        return {"embedder": opened.embedder.name, "where": opened.location}
    return {"where": opened.location}


def run(action: str, *, actor: str, scopes: list[str] | None = None) -> IndexCheck:
    """Verify, repair or rebuild both indexes, or tune the vector index's scopes (`scopes`, None:
    every one of the exact line or more), recorded as an IndexCheck (also when it fails). A rebuild
    of the vector index tunes it afterwards."""
    check = IndexCheck.objects.create(action=action, actor=actor)
    try:
        if action == IndexCheck.Action.VERIFY:
            diffs = verify()
            check.result = {"indexes": [diff.as_dict() for diff in diffs]}
            check.ok = all(diff.ok for diff in diffs)
        elif action == IndexCheck.Action.REPAIR:
            check.result = {"repaired": repair()}
            check.ok = not any("error" in done for done in check.result["repaired"].values() if isinstance(done, dict))
        elif action == IndexCheck.Action.REBUILD:
            check.result = {"rebuilt": rebuild()}
            check.result["tuned"] = tune()
            check.ok = True
        elif action == IndexCheck.Action.TUNE:
            check.result = {"tuned": tune(scopes)}
            check.ok = all(measured["reached"] for measured in check.result["tuned"].values())
        else:
            raise ValueError(f"unknown index check {action!r}; one of {', '.join(IndexCheck.Action.values)}")
    except IndexUnavailable as exc:
        check.ok, check.error = False, str(exc)
        raise
    finally:
        check.finished_at = timezone.now()
        check.save(update_fields=["result", "ok", "error", "finished_at"])
    return check


def summary(check: IndexCheck) -> str:
    """One line about a check: 'vector ok; bm25: 3 missing, 1 stale' or what was repaired."""
    if check.error:
        return f"failed: {check.error}"
    if check.finished_at is None:
        return "running"
    if "indexes" in check.result:
        parts = []
        for diff in check.result["indexes"]:
            if diff.get("error"):
                parts.append(f"{diff['index']}: unavailable")
            elif diff.get("ok"):
                parts.append(f"{diff['index']} ok")
            else:
                counts = [f"{diff[k]} {k}" for k in ("missing", "stale", "orphaned") if diff.get(k)]
                parts.append(f"{diff['index']}: " + ", ".join(counts))
        return "; ".join(parts)
    if "repaired" in check.result:
        parts = []
        for name, done in check.result["repaired"].items():
            if name == "outbox_cleared":
                parts.append(f"{done} pending finished")
            elif "error" in done:
                parts.append(f"{name}: unavailable")
            else:
                parts.append(f"{name}: {done['reindexed']} reindexed, {done['removed']} removed")
        return "; ".join(parts)
    parts = []
    if "rebuilt" in check.result:
        parts = [f"{name}: {count} indexed" for name, count in check.result["rebuilt"].items()]
    if "tuned" in check.result:
        tuned = check.result["tuned"]
        parts += [
            f"{scope}: ef_search {measured['ef_search']}, recall@10 {measured['recall']:.3f}"
            + ("" if measured["reached"] else f" (below the target {measured['target']:g})")
            for scope, measured in sorted(tuned.items())
        ]
        if not tuned and "rebuilt" not in check.result:
            parts.append("no scope big enough to measure")
    return "; ".join(parts)


def tune(scopes: list[str] | None = None) -> dict[str, dict]:
    """Measure the recall of these scopes' HNSW graphs (None: every scope of the exact line or
    more) and give each the ef_search it needs (searchindex/tuning.py); {} when measuring is off."""
    return tune_scopes(get_index("vector"), scopes)


def last_tuned(limit: int = 50) -> dict[str, dict]:
    """Each scope's latest measure (`tuning.Measured.as_dict`, with `at`: when), from the tune and
    rebuild checks."""
    found: dict[str, dict] = {}
    checks = IndexCheck.objects.filter(
        action__in=[IndexCheck.Action.TUNE, IndexCheck.Action.REBUILD], finished_at__isnull=False
    ).order_by("-started_at", "-id")[:limit]
    for check in checks:
        for scope, measured in (check.result or {}).get("tuned", {}).items():
            found.setdefault(scope, {**measured, "at": check.finished_at})
    return found


def tune_due() -> list[str]:
    """The scopes the daily measure takes: never measured, or grown or shrunk by a fifth since."""
    counts = get_index("vector").counts()
    return due(counts, {scope: measured["vectors"] for scope, measured in last_tuned().items()})


@dataclass
class IndexDiff:
    """How one index differs from the database."""

    index: str
    database: int = 0
    entries: int = 0
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.orphaned or self.error)

    def as_dict(self, *, sample: int = 20) -> dict:
        return {
            "index": self.index,
            "ok": self.ok,
            "database": self.database,
            "entries": self.entries,
            "missing": len(self.missing),
            "stale": len(self.stale),
            "orphaned": len(self.orphaned),
            "examples": {
                "missing": self.missing[:sample],
                "stale": self.stale[:sample],
                "orphaned": self.orphaned[:sample],
            },
            "error": self.error,
        }


def expected_entries() -> dict[str, str]:
    """What every index should hold: active memory id → its index fingerprint."""
    expected = {}
    queryset = Memory.objects.active().only(
        "id", "scope", "kind", "tier", "pinned", "text", "content_hash", "entity_key", "metadata"
    )
    for memory in queryset.iterator(chunk_size=2000):
        document = IndexedMemory.from_memory(memory)
        expected[document.id] = document.content_hash
    return expected


def verify(indexes: tuple[str, ...] = INDEX_NAMES) -> list[IndexDiff]:
    """Compare each index with the database; nothing is changed."""
    expected = expected_entries()
    diffs = []
    for name in indexes:
        diff = IndexDiff(index=name, database=len(expected))
        try:
            actual = get_index(name).entries()
        except IndexUnavailable as exc:
            diff.error = str(exc)
            diffs.append(diff)
            continue
        fingerprint = get_index(name).entry_fingerprint
        diff.entries = len(actual)
        diff.missing = sorted(set(expected) - set(actual))
        diff.orphaned = sorted(set(actual) - set(expected))
        diff.stale = sorted(pk for pk in set(expected) & set(actual) if fingerprint(expected[pk]) != actual[pk])
        diffs.append(diff)
    return diffs


def repair(diffs: list[IndexDiff] | None = None) -> dict:
    """Fix what `verify` found (re-index missing and stale, remove orphans) and clear the outbox.

    Every id is brought in line with the database as it is now, not as `verify` read it: a memory
    committed between verify's two reads looks orphaned (its entry is there, the snapshot lacks
    it), and removing its entry would lose an index kept in step with the write for good.
    """
    diffs = diffs if diffs is not None else verify()
    done = {}
    for diff in diffs:
        if diff.error:
            done[diff.index] = {"error": diff.error}
            continue
        todo = diff.missing + diff.stale + diff.orphaned
        moved = None
        if diff.index == "vector" and (diff.stale or diff.orphaned):
            # An entry left in a scope its memory moved out of (a move no outbox row named) is
            # stale, or orphaned once the memory is gone; the sync removes a memory only from the
            # scopes it is told of, so repair tells it where the index holds each one.
            try:
                moved = get_index("vector").scopes_holding(diff.stale + diff.orphaned)
            except IndexUnavailable as exc:
                done[diff.index] = {"error": str(exc)}
                continue
        reindexed = removed = 0
        for start in range(0, len(todo), CHUNK):
            report = sync_memories(todo[start : start + CHUNK], indexes=(diff.index,), moved=moved)
            reindexed, removed = reindexed + report.indexed, removed + report.removed
        done[diff.index] = {"reindexed": reindexed, "removed": removed}
    pending = [str(pk) for pk in IndexOutbox.objects.values_list("memory_id", flat=True)]
    for start in range(0, len(pending), CHUNK):
        sync_memories(pending[start : start + CHUNK])
    done["outbox_cleared"] = len(pending)
    return done


def rebuild(indexes: tuple[str, ...] = INDEX_NAMES) -> dict:
    """Drop the indexes and index every active memory again from the database.

    A whoosh index is replaced in one commit by a writer filled from a stream of the memories
    (`LexicalIndex.fill`): one segment, with no segment per chunk to merge, nor a lookup of each
    id among the entries written before it (chunk after chunk, a million memories slowed to a few
    thousand a minute), and searches read the old entries until the commit. The other indexes
    are reset and synced chunk by chunk, scope by scope, each scope's vector collection shaped for
    its number of memories (`searchindex.vector.graph_shape`). The outbox rows queued before the rebuild began are then
    done: every memory was read after they were written, and every index started over.
    """
    started = timezone.now()
    lexical = get_index("bm25") if "bm25" in indexes else None
    filled = lexical is not None and hasattr(lexical, "fill")
    chunked = tuple(name for name in indexes if not (filled and name == "bm25"))
    for name in chunked:
        get_index(name).reset()
    # Scope by scope: a chunk fills one or two scopes' collections in calls of BATCH vectors, not
    # twenty in calls of a few hundred, and one graph is built at a time.
    ids = [str(pk) for pk in Memory.objects.active().order_by("scope", "pk").values_list("pk", flat=True)]
    if filled:
        try:
            lexical.fill(_active_documents(ids), replace=True)
        except IndexUnavailable:  # an index it cannot open (a torn table of contents): start over
            lexical.reset()
            lexical.fill(_active_documents(ids), replace=True)
    for start in range(0, len(ids), REBUILD_CHUNK) if chunked else ():
        sync_memories(ids[start : start + REBUILD_CHUNK], indexes=chunked)
    if set(drained_by_outbox()) <= set(indexes):
        IndexOutbox.objects.filter(queued_at__lte=started).delete()
    return {name: len(ids) for name in indexes}


def _active_documents(ids: list[str]) -> Iterator[IndexedMemory]:
    """The index documents of these memories that are still active, read chunk by chunk."""
    for start in range(0, len(ids), REBUILD_CHUNK):
        for memory in Memory.objects.active().filter(pk__in=ids[start : start + REBUILD_CHUNK]):
            yield IndexedMemory.from_memory(memory)
