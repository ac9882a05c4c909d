"""One labelled set (bench/data/) as the store of MEMORYUI_DATA_DIR, shared by the quality benchmarks.

The store is written through the write path (`recall.golden.import_labelled`) and indexed with the
configured embedder, and kept until the set's file or the embedder changes, or an index no longer
verifies. Imported by file path as well as by name: a benchmark's child runs another commit's code
first on sys.path, where bench/ is not, and only uses what every commit of that code has.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path


def ensure(name: str, path: Path, memories: int) -> str:
    """Load the set at `path` into the store unless it holds it already; the embedder's name."""
    from django.core.management import call_command
    from django.db import transaction

    from memoryui.models import IndexOutbox, Memory, MemoryEvent
    from recall.golden import import_labelled
    from searchindex import health
    from searchindex import indexes as search_indexes

    call_command("migrate", verbosity=0)
    embedder = search_indexes.get_index("vector").embedder.name
    fingerprint = hashlib.sha256(path.read_bytes() + embedder.encode()).hexdigest()
    marker = Path(os.environ["MEMORYUI_DATA_DIR"]) / "store.fingerprint"
    if not (marker.exists() and marker.read_text() == fingerprint and all(d.ok for d in health.verify())):
        print(f"{name}: loading {memories} memories, indexing with {embedder} …", file=sys.stderr)
        with transaction.atomic():
            MemoryEvent.objects.all().delete()
            IndexOutbox.objects.all().delete()
            Memory.objects.all().delete()
        health.rebuild()  # empty
        import_labelled(json.loads(path.read_text(encoding="utf-8")), name=name, actor="bench")
        IndexOutbox.objects.all().delete()
        marker.write_text(fingerprint)
    # Whoosh keeps counting a replaced entry until its segment is merged, so a store indexed twice
    # (the write, then a sync) has doubled statistics; one segment makes them exact, as PostgreSQL's are.
    search_indexes.get_index("bm25").optimize()
    # A scope below the exact line is searched by HNSW until this process has read its vectors in
    # the background, exactly after: which queries got which would depend on the machine's load.
    # Read them first, as a process that has served a while holds them (older code has no warm).
    vector = search_indexes.get_index("vector")
    if hasattr(vector, "warm"):
        vector.warm()
    return embedder
