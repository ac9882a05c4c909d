"""Benchmark: list page, stats endpoint and a single pin at 100k memories.

Each operation is timed through the whole Django stack (middleware, auth, view, template or
serializer) in-process, beside the equivalent raw SQL measured in the same run, so the
ratio survives a noisy machine. Prints a table of medians and p95s and exits 0.

    .venv/bin/python bench/list_and_stats.py [--memories 100000] [--runs 60]

The generated store is cached in var/bench/ (rebuilt when --memories changes); set
DATABASE_URL to benchmark PostgreSQL instead of SQLite.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BENCH_DIR = ROOT / "var" / "bench"
BENCH_DIR.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("MEMORYUI_DATA_DIR", str(BENCH_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ["DJANGO_ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.decorators import login_required  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.paginator import Paginator  # noqa: E402
from django.db import connection  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings  # noqa: E402
from django.urls import include, path  # noqa: E402
from django.utils import timezone  # noqa: E402

from memoryui import rules  # noqa: E402
from memoryui.models import Memory, MemoryEvent  # noqa: E402
from web.filters import MemoryListFilterSet  # noqa: E402
from web.views import LIST_COLUMNS  # noqa: E402

SCOPES = [f"agent:bot-{i:02d}" for i in range(20)] + ["agent:main", "user:42", "global"]
WORDS_EN = [
    "deploy",
    "release",
    "cursor",
    "page",
    "token",
    "answer",
    "terse",
    "style",
    "owner",
    "escalation",
    "gpu",
    "cluster",
    "idc",
]
WORDS_ZH = ["部署", "发布", "幸运数字", "偏好", "简洁", "负责人", "集群", "显卡", "机房", "流程"]


def build_store(count: int) -> None:
    marker = BENCH_DIR / "store.count"
    if marker.exists() and marker.read_text() == str(count) and Memory.objects.count() == count:
        return
    print(f"building a store of {count} memories (cached in {BENCH_DIR}) …", file=sys.stderr)
    MemoryEvent.objects.all().delete()
    Memory.objects.all().delete()
    rnd = random.Random(7)
    now = timezone.now()
    batch: list[Memory] = []
    for i in range(count):
        kind = rnd.choice(rules.KINDS)
        placement = rules.place_memory(kind, rnd.random())
        words = rnd.sample(WORDS_EN, 4) + rnd.sample(WORDS_ZH, 2)
        text = f"memory {i}: " + " ".join(words)
        created = now - timedelta(minutes=rnd.randint(0, 60 * 24 * 365))
        batch.append(
            Memory(
                id=uuid.UUID(int=rnd.getrandbits(128)),
                scope=rnd.choice(SCOPES),
                kind=kind,
                tier=placement.tier,
                text=text,
                importance=placement.importance,
                confidence=0.7,
                pinned=placement.pinned,
                status="tombstoned" if rnd.random() < 0.05 else "active",
                source="import",
                content_hash=rules.content_hash(text),
                created_at=created,
                updated_at=created,
            )
        )
        if len(batch) == 5000:
            Memory.objects.bulk_create(batch)
            batch.clear()
    Memory.objects.bulk_create(batch)
    marker.write_text(str(count))


def timed(fn, runs: int) -> list[float]:
    fn()  # warm caches and connections
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[18]


def _empty_page(request):
    return HttpResponse(b"")


# The framework's own floor: the full middleware stack and a signed-in session, no work.
urlpatterns = [path("__floor__/", login_required(_empty_page)), path("", include("config.urls"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    build_store(args.memories)
    # Measure a store in steady state: planner statistics, and on PostgreSQL a visibility map
    # (what autovacuum keeps) so counts can use index-only scans.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE" if connection.vendor == "sqlite" else "VACUUM ANALYZE")
    user, _ = get_user_model().objects.get_or_create(username="bench", defaults={"is_superuser": True})
    client = Client()
    client.force_login(user)
    table = connection.ops.quote_name(Memory._meta.db_table)
    page_size = 50
    rnd = random.Random(1)
    target = Memory.objects.filter(scope="agent:main", status="active").values_list("pk", flat=True)[:1][0]

    def get(url: str, **headers):
        response = client.get(url, headers=headers)
        assert response.status_code == 200, (url, response.status_code)

    columns = "id, scope, kind, tier, text, importance, pinned, status, entity_key, updated_at"

    def page_sql(where: str, params: list, pages: int, with_scopes: bool = True) -> None:
        """What the list page needs from the database: count, one page, the scope choices."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}", params)
            cursor.fetchone()
            cursor.execute(
                f"SELECT {columns} FROM {table} WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT %s OFFSET %s",
                [*params, page_size, page_size * rnd.randint(0, pages - 1)],
            )
            cursor.fetchall()
        if with_scopes:
            Memory.objects.scope_names()  # hand-written SQL already (a loose index scan)

    filtered = ("status = %s AND scope = %s AND kind = %s", ["active", "agent:main", "fact"])
    # icontains: SQLite's LIKE already ignores ASCII case; PostgreSQL needs UPPER() on both sides.
    like = "{} LIKE %s" if connection.vendor == "sqlite" else "UPPER({}) LIKE UPPER(%s)"
    searched = (
        f"status = %s AND ({like.format('text')} OR {like.format('entity_key')})",
        ["active", "%escalation%", "%escalation%"],
    )

    def list_page():
        get(f"/memories/?scope=agent:main&kind=fact&page={rnd.randint(1, 3)}")

    def list_page_sql():
        page_sql(*filtered, pages=3)

    def list_fragment():
        get(f"/memories/?scope=agent:main&kind=fact&page={rnd.randint(1, 3)}", HX_Request="true")

    def list_fragment_sql():
        page_sql(*filtered, pages=3, with_scopes=False)

    def list_search():
        get(f"/memories/?q=escalation&page={rnd.randint(1, 20)}")

    def list_search_sql():
        page_sql(*searched, pages=20)

    def list_unfiltered():
        get(f"/memories/?page={rnd.randint(1, 50)}")

    def list_unfiltered_sql():
        page_sql("status = %s", ["active"], pages=50)

    def stats():
        get("/api/stats/")

    def stats_sql():
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT scope, status, kind, tier, pinned, COUNT(*) FROM {table} GROUP BY 1, 2, 3, 4, 5")
            cursor.fetchall()

    def pin():
        response = client.post(f"/api/memories/{target}/{rnd.choice(['pin', 'unpin'])}/")
        assert response.status_code == 200, response.status_code

    # SQLite stores UUIDs as 32 hex characters; PostgreSQL takes the UUID itself.
    target_param = target.hex if connection.vendor == "sqlite" else target
    events_table = connection.ops.quote_name(MemoryEvent._meta.db_table)

    def pin_sql():
        now = timezone.now()
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET pinned = NOT pinned, updated_at = %s WHERE id = %s", [now, target_param]
            )
            cursor.execute(
                f"INSERT INTO {events_table} (memory_id, action, actor, reason, created_at) "
                "VALUES (%s, %s, %s, %s, %s)",
                [target_param, "pinned", "bench", "", now],
            )

    def orm_page(**filters):
        """The data path of the list view: the same queryset, paginator and page it uses."""

        def run():
            memories = MemoryListFilterSet(filters, queryset=Memory.objects.all()).qs
            memories = memories.only(*LIST_COLUMNS).order_by("-updated_at", "-id")
            paginator = Paginator(memories, page_size)
            list(paginator.page(min(rnd.randint(1, 3), paginator.num_pages)).object_list)
            Memory.objects.scope_names()

        return run

    def orm_stats():
        Memory.objects.stats()

    rows = [
        ("list page, scope+kind filter", list_page, orm_page(scope="agent:main", kind="fact"), list_page_sql),
        ("list results (htmx), scope+kind filter", list_fragment, None, list_fragment_sql),
        ("list page, text search", list_search, orm_page(q="escalation"), list_search_sql),
        ("list page, unfiltered, deep pages", list_unfiltered, None, list_unfiltered_sql),
        ("stats endpoint /api/stats/", stats, orm_stats, stats_sql),
        ("single pin/unpin via API", pin, None, pin_sql),
    ]
    print(f"\n{Memory.objects.count()} memories on {connection.vendor}, {args.runs} runs each, times in ms")
    print("server = the whole Django request, in-process (middleware, auth, view, template or JSON);")
    print("orm = the view's own database work through the ORM; raw = the same data with hand-written SQL\n")
    header = (
        f"{'operation':40} {'server med':>10} {'p95':>7} | {'orm med':>8} {'p95':>7} | "
        f"{'raw med':>8} {'p95':>7} | {'server/raw':>10} {'orm/raw':>8}"
    )
    print(header)
    print("-" * len(header))
    for name, fn, orm, baseline in rows:
        server = timed(fn, args.runs)
        data = timed(orm, args.runs) if orm else None
        raw = timed(baseline, args.runs)
        orm_cells = f"{statistics.median(data):8.2f} {p95(data):7.2f}" if data else f"{'':8} {'':7}"
        orm_ratio = f"{p95(data) / p95(raw):7.2f}x" if data else f"{'':8}"
        print(
            f"{name:40} {statistics.median(server):10.2f} {p95(server):7.2f} | {orm_cells} | "
            f"{statistics.median(raw):8.2f} {p95(raw):7.2f} | {p95(server) / p95(raw):9.2f}x {orm_ratio}"
        )
    with override_settings(ROOT_URLCONF=sys.modules[__name__]):
        floor = timed(lambda: get("/__floor__/"), args.runs)
    print(
        f"\nframework floor (signed-in request to a view returning an empty page): "
        f"median {statistics.median(floor):.2f}, p95 {p95(floor):.2f}"
    )
    print("targets: list and stats p95 <= 150 ms at 100k, and within 3x of the raw query (p95 ratios)")


if __name__ == "__main__":
    main()
