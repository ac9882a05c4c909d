"""Measured ef_search: each big scope's HNSW graph is searched as wide as its own recall needs.

How many of the true nearest neighbours an HNSW search finds depends on the vectors, not only on
the settings: at 402,580 vectors in one scope, ef_search 300 finds 1.000 of the true top 10 in a
store spread like the labelled sets and 0.95 in one where every memory has ~80 close variants,
where 1000 is needed for 0.96; 1000 costs the spread store twice the time for nothing
(bench/hnsw_sweep.py). No one setting suits both, so each scope's is measured.

What it is measured with (the probes):

- **the queries the scope was asked**, when there are MIN_QUERIES or more: the texts of its recent
  recalls and golden queries (searchindex/probes.py: the recall app, which serves and keeps them,
  answers it), embedded as queries, up to `samples`. Their exact top 10 over every vector of the
  scope, read page by page, is compared with the graph's top 10 (a neighbour tied with the exact
  10th counts as found);
- otherwise **the scope's own vectors**: `samples` of them (seeded runs spread over the
  collection), each asked for its neighbours leaving itself out.

The queries are the faithful measure. Queries come from another region of the embedding space
than passages (e5's query prefix), and in a crowded scope the graph's own vectors find their
near-duplicate neighbours at any width: on the 1M store's agent:main (402,580 vectors, graph
96/200, bench/scale.py) the own-vector recall@10 read 0.980-0.988 at every ef_search from 200 to
1340 (three seeds), while real queries found 0.900 at 200, 0.940 at 460 and 0.957 at 1000 (200
traced queries; 200 others of the same mix 0.947, 0.974 and 0.989). Vectors moved from a
scope's own by isotropic noise (to a cosine of 0.95 to 0.8) were as flat. So the own vectors are
only the fallback for a scope too seldom asked to have queries.

The ladder: at the collection's ef_search, then wider (LADDER), until the recall@10 reaches
MEMORYUI_VECTOR_RECALL_TARGET; the narrowest that does becomes the collection's ef_search. When
none does, the first within PLATEAU of the best measured (a wider search buys nothing but its
cost); measured with the own vectors, one step past it, as their recall stops growing earlier
than real queries' (in five builds of the 1M store's agent:main, the step past was what real
queries needed).

The graph keeps max(ef_search, n) candidates, so asking it for n neighbours is the search
ef_search n makes: that is how each width is measured, with no change to the collection until the
end. A search asks for 50 and keeps the ef_search it was loaded with (asking for 1,000 results
instead costs more than the wider search: chromadb maps each result back to its id). So a width
narrower than the collection's ef_search cannot be measured without lowering it for every search
meanwhile, and is not: a scope's ef_search only grows, from MEMORYUI_CHROMA_HNSW_EF_SEARCH at its
creation (a rebuild starts every scope there again). The embedded index applies a new ef_search
at once in every process; a chromadb server when it next loads the graph (after a restart).

Scopes below MEMORYUI_VECTOR_EXACT_BELOW vectors are searched exactly and are not measured. A
measure reads the whole scope (~50 µs a vector from chromadb), so it runs when asked
(`manage.py reindex --tune`, the dashboard), after a rebuild, and daily for the scopes that grew
or shrank by a fifth since they were last measured (or never were).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from django.conf import settings

from searchindex.exact import unit_rows
from searchindex.probes import asked_queries
from searchindex.vector import VectorIndex

__all__ = ["K", "LADDER", "MIN_QUERIES", "Measured", "due", "ladder", "measure", "tune"]

K = 10  # the recall measured: of the top 10, what a search keeps of each scope's answer
SAMPLES = 200  # queries (or vectors of the scope) asked for their neighbours
MIN_QUERIES = 50  # a scope asked fewer distinct queries than this is measured with its own vectors
LADDER = (1.0, 1.5, 2.3, 3.4, 5.0, 6.7)  # ef_search tried, as multiples of the configured one
MAX_EF = 2000
TIE = 1e-5  # a found neighbour this close to the exact 10th similarity is as near as it
PLATEAU = 0.001  # out of reach, the recall stops growing at the first step within this of the best
GROWTH = 0.2  # a scope is measured again once its size moved by this share since its last measure
BLOCK = 8192  # vectors multiplied by the samples at once while the exact answers are worked out
BLOCKS = 20  # runs of consecutive vectors the samples are read in

QUERIES, VECTORS = "queries", "vectors"  # what a scope was measured with (Measured.probes)


def ladder(start: int | None = None) -> list[int]:
    """The ef_search values tried, narrowest first: MEMORYUI_CHROMA_HNSW_EF_SEARCH times each of
    LADDER (to MAX_EF); from `start` (a collection's own ef_search) on when given."""
    floor = settings.MEMORYUI_CHROMA_HNSW_EF_SEARCH
    steps = {min(MAX_EF, max(floor, round(floor * factor / 10) * 10)) for factor in LADDER}
    if start is None:
        return sorted(steps)
    return sorted({start} | {step for step in steps if step > start})


@dataclass
class Step:
    ef_search: int
    recall: float


@dataclass
class Measured:
    """One scope's measure: its size, the steps tried, and the ef_search it was given."""

    scope: str
    vectors: int
    samples: int
    target: float
    probes: str = VECTORS
    ef_search: int = 0
    recall: float = 0.0
    reached: bool = False
    steps: list[Step] = field(default_factory=list)
    read_s: float = 0.0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def measure(
    index: VectorIndex,
    scope: str,
    *,
    target: float,
    samples: int = SAMPLES,
    seed: int = 0,
    apply: bool = True,
    queries: Sequence[str] = (),
) -> Measured | None:
    """Measure the recall@10 of `scope`'s graph up the ladder from its ef_search and (`apply`) give
    it the narrowest that reaches `target`: with up to `samples` of `queries` (texts the scope was
    asked) when there are MIN_QUERIES or more distinct ones, else with `samples` of its own vectors.
    None when the scope has too few vectors to measure."""
    started = time.perf_counter()
    graph = index.graph(scope)
    total = graph["vectors"] if graph else 0
    if total <= K + 1:
        return None
    # The graph keeps at least its own ef_search candidates, whatever it is asked for: the ladder
    # starts there (the configured one, or what an earlier measure gave the collection).
    floor = graph["ef_search"]
    texts = list(dict.fromkeys(queries))[:samples]
    if len(texts) >= MIN_QUERIES:
        probes, ids = QUERIES, [None] * len(texts)
        vectors = unit_rows(np.asarray(index.embedder.embed_queries(texts), dtype=np.float32))
    else:
        probes, ids, vectors = VECTORS, *_own_vectors(index, scope, total, samples, seed)
        if len(ids) <= 1:
            return None
    truth, size = exact_answers(index, scope, ids, vectors)
    read_s = time.perf_counter() - started
    result = Measured(scope=scope, vectors=size, samples=len(ids), target=target, probes=probes, read_s=read_s)
    for ef in ladder(floor):
        wanted = min(ef + (probes == VECTORS), size)  # a vector of the scope is among its own neighbours
        recalls = []
        for pk, query, (best_ids, kth) in zip(ids, vectors, truth, strict=True):
            found = index.graph_neighbours(scope, query, wanted)
            top = [(distance, other) for distance, other in found if other != pk][:K]
            recalls.append(_recall(top, best_ids, kth))
        step = Step(ef, round(statistics.fmean(recalls), 4))
        result.steps.append(step)
        result.ef_search, result.recall = ef, step.recall
        if step.recall >= target:
            result.reached = True
            break
    if not result.reached:
        # Out of reach: where the recall stops growing (a wider search gains nothing but its cost);
        # with the own vectors one step past it, as real queries gain up to a step later.
        best = max(step.recall for step in result.steps)
        flat = next(n for n, step in enumerate(result.steps) if step.recall >= best - PLATEAU)
        kept = result.steps[min(flat + (probes == VECTORS), len(result.steps) - 1)]
        result.ef_search, result.recall = kept.ef_search, kept.recall
    if apply and result.ef_search != floor:
        index.set_ef_search(scope, result.ef_search)
    result.seconds = time.perf_counter() - started
    return result


def _own_vectors(index: VectorIndex, scope: str, total: int, samples: int, seed: int) -> tuple[list[str], np.ndarray]:
    """`samples` of the scope's vectors, as unit rows, and their ids."""
    # BLOCKS runs of vectors spread over the collection (chromadb reaches a row by skipping every
    # row before it, so one read a vector would cost as much as reading the scope 20 times): the
    # positions are the seed's, the vectors whatever the collection holds there now.
    if samples >= total:
        run, starts = total, [0]
    else:
        run = max(1, -(-samples // BLOCKS))
        starts = random.Random(f"{seed}:{scope}").sample(range(max(1, total - run + 1)), min(BLOCKS, total))
    picked: dict[str, np.ndarray] = {}
    for start in sorted(starts):
        for page_ids, page in index.vector_pages(scope, offset=start, limit=run, page=run):
            picked.update(zip(page_ids, page, strict=True))
    ids = list(picked)[:samples]
    if not ids:
        return [], np.empty((0, 0), dtype=np.float32)
    return ids, unit_rows(np.asarray([picked[pk] for pk in ids], dtype=np.float32))


def exact_answers(
    index: VectorIndex, scope: str, ids: Sequence[str | None], queries: np.ndarray
) -> tuple[list[tuple[set[str], float]], int]:
    """For each query, the ids of its exact top K among the scope's vectors (leaving out the
    query's own id in `ids`: a vector of the scope asked for its neighbours; None for a query) and
    the K-th similarity; and how many vectors the scope holds."""
    best_sims = np.full((len(ids), K + 1), -np.inf, dtype=np.float32)
    best_ids = np.full((len(ids), K + 1), "", dtype=object)
    size = 0
    pending_ids: list[str] = []
    pending: list[np.ndarray] = []

    def merge() -> None:
        block = unit_rows(np.vstack(pending))
        sims = queries @ block.T
        block_ids = np.asarray(pending_ids, dtype=object)
        sims_all = np.hstack([best_sims, sims])
        ids_all = np.hstack([best_ids, np.broadcast_to(block_ids, sims.shape)])
        keep = np.argpartition(-sims_all, K, axis=1)[:, : K + 1]
        best_sims[:] = np.take_along_axis(sims_all, keep, axis=1)
        best_ids[:] = np.take_along_axis(ids_all, keep, axis=1)
        pending_ids.clear()
        pending.clear()

    for page_ids, page in index.vector_pages(scope):
        size += len(page_ids)
        pending_ids.extend(page_ids)
        pending.append(page)
        if len(pending_ids) >= BLOCK:
            merge()
    if pending_ids:
        merge()
    answers = []
    for n, pk in enumerate(ids):
        order = np.argsort(-best_sims[n])
        ranked = [(float(best_sims[n][j]), best_ids[n][j]) for j in order if best_ids[n][j] not in ("", pk)][:K]
        answers.append(({other for _, other in ranked}, ranked[-1][0] if ranked else -1.0))
    return answers, size


def _recall(top: list[tuple[float, str]], best: set[str], kth: float) -> float:
    """Of the exact top K, the share the graph's top K holds (one tied with the K-th counts)."""
    if not best:
        return 1.0
    found = sum(1 for distance, pk in top if pk in best or 1.0 - distance >= kth - TIE)
    return min(found, len(best)) / len(best)


def due(counts: Mapping[str, int], last: Mapping[str, int]) -> list[str]:
    """The scopes to measure: those of the exact line or more vectors never measured, or whose
    size moved by GROWTH or more since (`last`: scope → its size when last measured)."""
    line = max(settings.MEMORYUI_VECTOR_EXACT_BELOW, K + 2)
    found = []
    for scope, count in counts.items():
        if count < line:
            continue
        before = last.get(scope)
        if before is None or abs(count - before) >= GROWTH * before:
            found.append(scope)
    return sorted(found)


def tune(
    index: VectorIndex, scopes: Iterable[str] | None = None, *, target: float | None = None, samples: int = SAMPLES
) -> dict[str, dict]:
    """Measure these scopes (None: every one at or above the exact line), with the queries each
    was asked where there are enough (`asked`), and give each the ef_search it needs; by scope,
    what was measured (`Measured.as_dict`)."""
    target = settings.MEMORYUI_VECTOR_RECALL_TARGET if target is None else target
    if target is None:
        return {}
    if scopes is None:
        scopes = due(index.counts(), {})
    done = {}
    for scope in scopes:
        queries = asked_queries(scope, samples)
        measured = measure(index, scope, target=target, samples=samples, queries=queries)
        if measured is not None:
            done[scope] = measured.as_dict()
    return done
