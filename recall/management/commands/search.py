"""Search memories the way the dashboard and `/api/search/` do, from the command line.

python manage.py search "lucky number" --scope agent:main
python manage.py search 18600000000 --scope main --retriever bm25 --json
python manage.py search "stop padding your replies" --scope main --retriever vector --limit 10
"""

from __future__ import annotations

from django.core.management.base import CommandError

from memoryui import rules
from memoryui.management.base import ReportingCommand
from memoryui.templatetags.memoryui_format import shorten
from recall.documents import IndexUnavailable
from recall.search import RETRIEVERS, SearchError, search


class Command(ReportingCommand):
    help = "Search active memories of a scope (retrieval only: vector, BM25 or both fused)."

    def add_arguments(self, parser):
        parser.add_argument("query", help="what to search for: words in any language, a name, a number, an id")
        parser.add_argument(
            "--scope", action="append", required=True, help="scope to search, repeatable; `main` means agent:main"
        )
        parser.add_argument("--limit", type=int, default=None, help="results, 1..20 (default 5); clamped and stated")
        parser.add_argument("--retriever", choices=RETRIEVERS, default="hybrid", help="default: hybrid")
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        try:
            scopes = list(dict.fromkeys(rules.normalize_scope(scope) for scope in options["scope"]))
        except rules.ScopeError as exc:
            raise CommandError(f"--scope: {exc}") from None
        try:
            result = search(options["query"], scopes=scopes, limit=options["limit"], retriever=options["retriever"])
        except SearchError as exc:
            raise CommandError(f"{'query' if exc.field == 'q' else exc.field}: {exc}") from None
        except IndexUnavailable as exc:
            raise CommandError(f"{exc}; run `manage.py reindex --verify` to check the indexes") from None
        if options["json"]:
            self.report(result.to_dict())
            return
        self.stdout.write(self._describe(result))

    def _describe(self, result) -> str:
        lines = [f"{result.retriever} search in {', '.join(result.scopes)}: {result.query!r}"]
        lines += [f"note: {notice}" for notice in result.notices]
        if not result.results:
            lines.append("no memory matches (see the near misses below for why)")
        for n, found in enumerate(result.results, 1):
            hit = found.to_dict()
            lines.append(f"{n:>2}. {hit['id']}  {hit['kind']}/{hit['tier']}  score {hit['score']:.5f}")
            lines.append(f"    {shorten(found.memory.text, 100)}")
            lines.append(f"    {_ranks(hit)}")
        if result.near_misses:
            lines.append("near misses:")
            for found in result.near_misses:
                hit = found.to_dict()
                lines.append(f"  - {hit['id']}  {shorten(found.memory.text, 70)}")
                lines.append(f"    {_ranks(hit)}; dropped: {'; '.join(hit['dropped_by'])}")
        return "\n".join(lines)


def _ranks(hit: dict) -> str:
    vector = (
        f"vector #{hit['vector_rank']} ({hit['vector_similarity']:.3f})" if hit["vector_rank"] else "vector: no match"
    )
    bm25 = (
        f"BM25 #{hit['bm25_rank']} ({hit['bm25_score']:.2f}, covers {hit['bm25_coverage']:.0%})"
        if hit["bm25_rank"]
        else "BM25: no match"
    )
    adjustments = ", ".join(f"{name} {value:+.5f}" for name, value in hit["adjustments"].items() if value)
    return f"{vector}, {bm25}, RRF {hit['rrf_score']:.5f}" + (f", rerank {adjustments}" if adjustments else "")
