"""Duplicate clusters over a whole scope (docs/architecture.md "Write path", step 7, applied after the fact).

The write path merges a duplicate as it arrives; a store that was written without dedup (a
legacy import, a restore, a store from before the threshold was tuned) needs the same three
layers applied to what it already holds:

    exact       the same normalized text (content hash)
    entity_key  the same `type:value`: the memory's own key, or the one key the L0 extractor
                finds in its text ("我的幸运数字是 88 66 99" and an entity memory
                lucky_number:88-66-99 say the same thing)
    semantic    passage embeddings at least `threshold` cosine-similar, unless the numbers
                differ, one negates the other, or their entity keys differ

Linked memories form a cluster (union-find). A cluster is labelled by every layer that links it
("same text + similar meaning"), and each member says how it joined: the same text or entity key
as the proposed canonical, or the link that brought it in. The proposed canonical is the one a
reader would keep: pinned, higher tier, typed rather than a note, keyed; among equals, one of the
members the cluster's strongest links join (five copies of a text, not the unrelated text a loose
threshold hung on them), then more important, more used, older. Merging a cluster is
hygiene.merging.

Identical texts are always `exact`, never a semantic pair, and never kept apart from each other.
A pair kept apart is reported once per pair of texts, with how many copies of each it stands for.

Clustering reads and changes nothing, so a threshold can be replayed freely: `compare` says
which clusters would form, grow, join, shrink, split or dissolve at another threshold.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from django.conf import settings
from django.db import connection

from ingest.extraction.l0_statements import l0_extract
from memoryui import rules
from memoryui.models import DistinctPair, IndexOutbox, Memory
from memoryui.reports import Report
from searchindex.documents import IndexUnavailable
from searchindex.embeddings import EmbedderUnavailable
from searchindex.indexes import get_index

logger = logging.getLogger(__name__)

LAYERS = ("exact", "entity_key", "semantic")
LAYER_LABELS = {"exact": "same text", "entity_key": "same entity key", "semantic": "similar meaning"}
REPLAY_RANGE = (0.90, 1.0)  # the thresholds the replay slider offers
# One rule for layer 3, here and on write (memoryui.rules.semantic_link).
RESTATEMENT_FLOOR, RESTATED = rules.RESTATEMENT_FLOOR, rules.RESTATED
_ROWS_PER_BLOCK = 1024  # similarity rows computed at a time: 1024 x n float32


def default_threshold() -> float:
    """The semantic layer's threshold: the write path's, or 0.985 when that layer is off."""
    configured = settings.MEMORYUI_SEMANTIC_DEDUP_THRESHOLD
    return configured if configured is not None else 0.985


_SIMILARITY = {"convert": lambda similarity: round(similarity, 4)}  # as reports show it


@dataclass(frozen=True)
class Link(Report):
    a: str
    b: str
    layer: str
    similarity: float | None = field(default=None, metadata={**_SIMILARITY, "omit_empty": True})
    detail: str = field(default="", metadata={"omit_empty": True})  # the entity key, for the entity_key layer


@dataclass(frozen=True)
class KeptApart(Report):
    """A pair of texts above the threshold that a guard kept out of one cluster, and why.

    Identical copies make the same pair over and over: it is reported once, by one memory of
    each text (`a`, `b`), with how many active memories hold each text (`copies_a`, `copies_b`).
    """

    a: str
    b: str
    similarity: float = field(metadata=_SIMILARITY)
    reason: str
    copies_a: int = 1
    copies_b: int = 1

    @property
    def pairs(self) -> int:
        """How many pairs of memories this pair of texts stands for."""
        return self.copies_a * self.copies_b


@dataclass
class Member:
    memory: Memory
    similarity: float | None = None  # cosine similarity to the canonical memory
    # How it joined: the same text or key as the canonical, its link to the canonical, else its
    # strongest link to another member (`via`, that member's id).
    link: Link | None = None
    via: str | None = None

    @property
    def linked_by(self) -> str:
        """How this member joined, in words ("same text", "similar meaning 0.929")."""
        if self.link is None:
            return ""
        words = LAYER_LABELS[self.link.layer]
        if self.link.layer == "semantic" and self.link.similarity is not None:
            words += f" {self.link.similarity:.3f}"
        return words

    def to_dict(self) -> dict:
        m = self.memory
        data = {
            "id": str(m.pk),
            "text": m.text,
            "kind": m.kind,
            "tier": m.tier,
            "pinned": m.pinned,
            "importance": m.importance,
            "access_count": m.access_count,
            "entity_key": m.entity_key,
            "created_at": m.created_at.isoformat(),
        }
        if self.similarity is not None:
            data["similarity"] = round(self.similarity, 4)
        if self.link is not None:
            data["layer"] = self.link.layer
        if self.via is not None:
            data["via"] = self.via
        return data


@dataclass
class Cluster:
    scope: str
    members: list[Member]  # the proposed canonical first
    links: list[Link]

    @cached_property
    def key(self) -> str:
        """A stable name for this set of memories (the same set gets the same key)."""
        return cluster_key(m.memory.pk for m in self.members)

    @property
    def canonical(self) -> Memory:
        return self.members[0].memory

    @property
    def duplicates(self) -> list[Memory]:
        return [m.memory for m in self.members[1:]]

    @cached_property
    def ids(self) -> frozenset[str]:
        return frozenset(str(m.memory.pk) for m in self.members)

    @property
    def layer(self) -> str:
        """The strongest layer linking the cluster (exact > entity key > semantic)."""
        return self.layers[0]

    @property
    def layers(self) -> list[str]:
        """Every layer that links the cluster, strongest first."""
        found = {link.layer for link in self.links}
        return [layer for layer in LAYERS if layer in found]

    @property
    def label(self) -> str:
        """What links the members, every layer of it: "same text + similar meaning"."""
        return " + ".join(LAYER_LABELS[layer] for layer in self.layers)

    def to_dict(self) -> dict:
        return {
            "key": self.key,
            "scope": self.scope,
            "layer": self.layer,
            "layers": self.layers,
            "canonical": str(self.canonical.pk),
            "members": [member.to_dict() for member in self.members],
            "links": [link.to_dict() for link in self.links],
        }


@dataclass
class ClusterReport:
    scope: str
    threshold: float
    memories: int  # active memories clustered
    clusters: list[Cluster] = field(default_factory=list)
    kept_apart: list[KeptApart] = field(default_factory=list)
    semantic_skipped: str | None = None  # why the semantic layer did not run
    # The unit passage vectors it compared (None without the semantic layer): a replay at
    # another threshold reuses them instead of reading the index again.
    vectors: np.ndarray | None = field(default=None, repr=False)

    @property
    def duplicates(self) -> int:
        """How many memories merging every cluster would tombstone."""
        return sum(len(cluster.members) - 1 for cluster in self.clusters)

    def by_layer(self) -> dict[str, int]:
        counts = dict.fromkeys(LAYERS, 0)
        for cluster in self.clusters:
            counts[cluster.layer] += 1
        return counts

    def to_dict(self) -> dict:
        return {
            "scope": self.scope,
            "threshold": self.threshold,
            "memories": self.memories,
            "clusters": len(self.clusters),
            "duplicates": self.duplicates,
            "by_layer": self.by_layer(),
            "semantic_skipped": self.semantic_skipped,
            "kept_apart": [pair.to_dict() for pair in self.kept_apart],
            "cluster_list": [cluster.to_dict() for cluster in self.clusters],
        }


def cluster_key(ids) -> str:
    return hashlib.sha256("|".join(sorted(str(pk) for pk in ids)).encode()).hexdigest()[:12]


# --- clustering ------------------------------------------------------------------------------


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        ri, rj = self.find(i), self.find(j)
        if ri != rj:
            self.parent[max(ri, rj)] = min(ri, rj)


def canonical_order(memory: Memory, *, core: bool = True) -> tuple:
    """Sort key: the memory a reader would keep comes first. Within a cluster, `core` says whether
    the cluster's strongest links join it: among otherwise equal memories, those come first."""
    return (
        not memory.pinned,
        rules.TIERS.index(memory.tier),
        memory.kind == Memory.Kind.NOTE,
        not memory.entity_key,
        not core,
        -memory.importance,
        -memory.access_count,
        memory.created_at,
        str(memory.pk),
    )


def text_entity_key(text: str) -> str | None:
    """The one entity key the L0 extractor finds in `text`, if exactly one."""
    keys = {fact.entity_key for fact in l0_extract(text) if fact.entity_key}
    return keys.pop() if len(keys) == 1 else None


def passage_vectors(scope: str, memories: list) -> np.ndarray:
    """Unit passage vectors of `memories`: from the vector index where its entry is current,
    embedded here otherwise. Raises IndexUnavailable / EmbedderUnavailable.

    The index keeps no text to compare with: an entry is current unless the memory has a pending
    outbox row (a change the index sync has not written yet)."""
    index = get_index("vector")
    stored = index.vectors(scope)
    pending = IndexOutbox.objects.filter(memory_id__in=Memory.objects.filter(scope=scope).values("pk"))
    behind = {_key(pk) for pk in pending.values_list("memory_id", flat=True)}
    vectors = np.zeros((len(memories), index.embedder.dim), dtype=np.float32)
    missing = []
    for row, memory in enumerate(memories):
        entry = stored.get(_dashed(_key(memory.pk)))
        if entry is not None and _key(memory.pk) not in behind:
            vectors[row] = entry
        else:
            missing.append(row)
    if missing:
        vectors[missing] = index.embedder.embed_passages([memories[row].text for row in missing])
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def similar_pairs(vectors: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """Every (i, j, cosine) with i < j and cosine >= threshold, block by block."""
    pairs = []
    n = len(vectors)
    for start in range(0, n, _ROWS_PER_BLOCK):
        block = vectors[start : start + _ROWS_PER_BLOCK] @ vectors.T
        rows, cols = np.nonzero(block >= threshold)
        for row, col in zip(rows.tolist(), cols.tolist(), strict=True):
            i = start + row
            if i < col:
                pairs.append((i, col, float(block[row, col])))
    return pairs


def find_clusters(
    scope: str,
    *,
    threshold: float | None = None,
    layers: tuple[str, ...] = LAYERS,
    memories: list | None = None,
    vectors: np.ndarray | None = None,
) -> ClusterReport:
    """The duplicate clusters among the active memories of `scope`; changes nothing.

    `memories` (Memory objects, or the light rows of `load_rows`) and `vectors` let a caller
    that replays several thresholds load them once.
    """
    scope = rules.normalize_scope(scope)
    threshold = default_threshold() if threshold is None else threshold
    if not 0.0 < threshold <= 1.0:
        raise rules.MemoryValidationError({"threshold": ["must be above 0 and at most 1"]})
    unknown = sorted(set(layers) - set(LAYERS))
    if unknown:
        raise rules.MemoryValidationError({"layers": [f"unknown layer {', '.join(unknown)}"]})
    if memories is None:
        memories = load_rows(scope, with_text=bool({"entity_key", "semantic"} & set(layers)))
    report = ClusterReport(scope=scope, threshold=threshold, memories=len(memories))
    if len(memories) < 2:
        return report
    ids = [_key(m.pk) for m in memories]
    distinct = _distinct_pairs(scope)
    keys = [m.entity_key or (text_entity_key(m.text) if "entity_key" in layers else None) for m in memories]
    links: list[tuple[int, int, Link]] = []
    apart: dict[int, set[int]] = {}  # pairs the guards keep apart, by member

    def link(i: int, j: int, layer: str, similarity: float | None = None, detail: str = "") -> None:
        if frozenset((ids[i], ids[j])) in distinct:
            return
        links.append((i, j, Link(_dashed(ids[i]), _dashed(ids[j]), layer, similarity, detail)))

    groups: dict[tuple[str, str], list[int]] = {}
    for i, memory in enumerate(memories):
        if "exact" in layers:
            groups.setdefault(("exact", memory.content_hash), []).append(i)
        if "entity_key" in layers and keys[i]:
            groups.setdefault(("entity_key", keys[i]), []).append(i)
    for (layer, value), rows in groups.items():
        for j in rows[1:]:
            link(rows[0], j, layer, detail=value if layer == "entity_key" else "")

    hashes = [m.content_hash for m in memories]
    apart_pairs: list[tuple[int, int, float, str]] = []  # (i, j, similarity, reason), as found
    if "semantic" in layers:
        if vectors is None:
            try:
                vectors = passage_vectors(scope, memories)
            except (IndexUnavailable, EmbedderUnavailable) as exc:
                report.semantic_skipped = f"semantic layer skipped: {exc}"
        report.vectors = vectors
        if vectors is not None:
            for i, j, similarity in similar_pairs(vectors, min(threshold, RESTATEMENT_FLOOR)):
                if hashes[i] == hashes[j]:
                    continue  # the same text: layer 1's (exact), never a semantic pair
                a, b = memories[i], memories[j]
                detail, reason = rules.semantic_link(a.text, b.text, similarity, threshold, keys[i], keys[j])
                if detail is None and reason is None:
                    continue
                if reason is None and frozenset((ids[i], ids[j])) in distinct:
                    reason = "marked as not duplicates"
                if reason:
                    apart_pairs.append((i, j, similarity, reason))
                    apart.setdefault(i, set()).add(j)
                    apart.setdefault(j, set()).add(i)
                else:
                    link(i, j, "semantic", similarity, detail)

    union = _UnionFind(len(memories))
    members_of: dict[int, list[int]] = {i: [i] for i in range(len(memories))}
    kept: list[tuple[int, Link]] = []
    row_of = {_dashed(key): row for row, key in enumerate(ids)}
    # Exact and entity-key links first, then semantic ones from the closest down. A semantic link
    # never joins two groups holding a pair the guards keep apart: "Deploys after the smoke tests"
    # restates both "... the 3 smoke tests" and "... the 4 smoke tests", which must not merge.
    order = sorted(links, key=lambda item: (item[2].layer == "semantic", -(item[2].similarity or 1.0)))
    for i, j, found in order:
        ri, rj = union.find(i), union.find(j)
        if ri == rj:
            kept.append((ri, found))
            continue
        if found.layer == "semantic":
            small, other = (members_of[ri], rj) if len(members_of[ri]) <= len(members_of[rj]) else (members_of[rj], ri)
            clash = next(((x, y) for x in small for y in apart.get(x, ()) if union.find(y) == other), None)
            if clash is not None:
                why = f"would join memories kept apart ({ids[clash[0]][:8]}, {ids[clash[1]][:8]})"
                apart_pairs.append((i, j, found.similarity or 0.0, why))
                continue
        union.union(i, j)
        root = union.find(i)
        members_of[root] = members_of.pop(ri if root != ri else rj, []) + members_of.get(root, [])
        kept.append((root, found))
    report.kept_apart = _distinct_kept_apart(apart_pairs, ids, hashes)
    links_of: dict[int, list[Link]] = {}
    for root, found in kept:
        links_of.setdefault(union.find(root), []).append(found)
    clustered: list[tuple[list[int], list[Link]]] = []
    for root, rows in members_of.items():
        if len(rows) < 2:
            continue
        clustered.append((rows, links_of[root]))
    # Whole rows only for the memories that are in a cluster (a small share of a large scope).
    loaded = {_key(m.pk): m for m in memories if isinstance(m, Memory)}
    missing = [ids[i] for rows, _ in clustered for i in rows if ids[i] not in loaded]
    if missing:
        loaded.update({m.pk.hex: m for m in Memory.objects.filter(pk__in=missing).only(*MEMBER_FIELDS)})
    for rows, cluster_links in clustered:
        members = [loaded[ids[i]] for i in rows]
        report.clusters.append(
            _cluster(scope, members, cluster_links, vectors, rows, keys=[keys[i] for i in rows], row_of=row_of)
        )
    report.clusters.sort(
        key=lambda c: (LAYERS.index(c.layer), len(c.layers), -len(c.members), canonical_order(c.canonical))
    )
    return report


def _distinct_kept_apart(
    found: list[tuple[int, int, float, str]], ids: list[str], hashes: list[str]
) -> list[KeptApart]:
    """One entry per pair of texts (copies of a text make the same pair again and again), closest
    first; never a memory and its own copy."""
    groups: dict[frozenset, dict] = {}
    for i, j, similarity, reason in sorted(found, key=lambda pair: -pair[2]):
        if hashes[i] == hashes[j]:
            continue
        if hashes[i] > hashes[j]:
            i, j = j, i  # one orientation per pair of texts
        group = groups.setdefault(
            frozenset((hashes[i], hashes[j])),
            {"first": (i, j, similarity, reason), "a": set(), "b": set()},
        )
        group["a"].add(i)
        group["b"].add(j)
    return [
        KeptApart(_dashed(ids[i]), _dashed(ids[j]), similarity, reason, len(group["a"]), len(group["b"]))
        for group in groups.values()
        for i, j, similarity, reason in [group["first"]]
    ]


@dataclass(frozen=True)
class Row:
    """What clustering reads of a memory; whole rows are loaded only for clustered ones."""

    pk: object  # the id as the database returns it (a UUID, or its hex digits on SQLite)
    content_hash: str
    entity_key: str | None
    text: str = ""


# What a cluster shows of its members (loaded for clustered memories only).
MEMBER_FIELDS = (
    "scope", "kind", "tier", "text", "importance", "pinned", "status", "entity_key", "content_hash",
    "access_count", "created_at", "metadata",
)  # fmt: skip


def load_rows(scope: str, *, with_text: bool = True) -> list[Row]:
    """The active memories of `scope` as light rows, read with the ORM's SQL but without its
    per-value converters: building 20k UUIDs and model instances costs more than clustering."""
    fields = ("pk", "content_hash", "entity_key", *(("text",) if with_text else ()))
    sql, params = Memory.objects.active().filter(scope=scope).values_list(*fields).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Row(*values) for values in cursor.fetchall()]


def _key(pk) -> str:
    """A memory id as 32 lowercase hex digits, whatever form the database or caller gives it in."""
    return pk.hex if isinstance(pk, uuid.UUID) else str(pk).replace("-", "").lower()


def _dashed(key: str) -> str:
    return str(uuid.UUID(key))


def _distinct_pairs(scope: str) -> set[frozenset[str]]:
    rows = DistinctPair.objects.filter(scope=scope).values_list("first", "second")
    return {frozenset((a.hex, b.hex)) for a, b in rows}


def _cluster(
    scope: str, memories: list[Memory], links: list[Link], vectors, rows: list[int], *, keys: list, row_of: dict
) -> Cluster:
    core = _strongest_core(memories, links, row_of, rows)
    order = sorted(range(len(memories)), key=lambda n: canonical_order(memories[n], core=n in core))
    first = order[0]
    canonical = memories[first]
    members = [Member(canonical)]
    for n in order[1:]:
        memory = memories[n]
        similarity = None
        if vectors is not None:
            similarity = float(np.dot(vectors[rows[n]], vectors[rows[first]]))
        member = Member(memory, similarity)
        member.link, member.via = _how_it_joined(memory, canonical, keys[n], keys[first], links)
        members.append(member)
    return Cluster(scope=scope, members=members, links=links)


def _strongest_core(memories: list[Memory], links: list[Link], row_of: dict, rows: list[int]) -> set[int]:
    """The members the cluster's strongest layer joins: the largest group its links connect.

    A loose threshold can hang an unrelated text on five copies of another by one semantic link;
    the canonical is proposed among the copies, not the text that hangs on them.
    """
    strongest = min((link.layer for link in links), key=LAYERS.index)
    position = {row: n for n, row in enumerate(rows)}
    union = _UnionFind(len(memories))
    for link in links:
        if link.layer == strongest:
            union.union(position[row_of[link.a]], position[row_of[link.b]])
    groups: dict[int, set[int]] = {}
    for n in range(len(memories)):
        groups.setdefault(union.find(n), set()).add(n)
    joined = [group for group in groups.values() if len(group) > 1]
    if not joined:
        return set()
    rank = {n: r for r, n in enumerate(sorted(range(len(memories)), key=lambda n: canonical_order(memories[n])))}
    # The largest group; of two as large, the one holding the memory a reader would keep.
    return max(joined, key=lambda group: (len(group), -min(rank[n] for n in group)))


def _how_it_joined(memory: Memory, canonical: Memory, key, canonical_key, links: list[Link]):
    """(the link that says how `memory` joined the cluster, the other member's id when that is not
    the canonical): the same text or key as the canonical first, then a link to it, then its
    strongest link to any member."""
    pk, kept = str(memory.pk), str(canonical.pk)
    if memory.content_hash == canonical.content_hash:
        return Link(kept, pk, "exact"), None
    if key and key == canonical_key:
        return Link(kept, pk, "entity_key", detail=key), None
    touching = [link for link in links if pk in (link.a, link.b)]
    direct = [link for link in touching if kept in (link.a, link.b)]
    strongest = min(direct or touching, key=_link_strength, default=None)
    if strongest is None or direct:
        return strongest, None
    return strongest, strongest.b if strongest.a == pk else strongest.a


def _link_strength(link: Link) -> tuple:
    return LAYERS.index(link.layer), -(link.similarity or 1.0)


# --- threshold replay ------------------------------------------------------------------------


@dataclass
class ClusterChange(Report):
    change: str  # forms, grows, joins, shrinks, splits, dissolves, unchanged
    cluster: Cluster | None  # the cluster at the replayed threshold (None when it dissolves)
    # The clusters at the current threshold it comes from, shown by their keys.
    before: list[Cluster] = field(metadata={"convert": lambda before: [cluster.key for cluster in before]})


def compare(current: ClusterReport, replayed: ClusterReport) -> list[ClusterChange]:
    """What replaying at `replayed.threshold` would do to the clusters of `current`."""
    changes = []
    for cluster in replayed.clusters:
        overlapping = [old for old in current.clusters if old.ids & cluster.ids]
        if len(overlapping) == 1 and overlapping[0].ids == cluster.ids:
            change = "unchanged"
        elif not overlapping:
            change = "forms"
        elif len(overlapping) > 1:
            change = "joins"
        elif cluster.ids > overlapping[0].ids:
            change = "grows"
        else:
            siblings = [other for other in replayed.clusters if other.ids & overlapping[0].ids]
            change = "splits" if len(siblings) > 1 else "shrinks"
        changes.append(ClusterChange(change, cluster, overlapping))
    for old in current.clusters:
        if not any(old.ids & cluster.ids for cluster in replayed.clusters):
            changes.append(ClusterChange("dissolves", None, [old]))
    order = ("forms", "grows", "joins", "splits", "shrinks", "dissolves", "unchanged")
    changes.sort(key=lambda c: order.index(c.change))
    return changes
