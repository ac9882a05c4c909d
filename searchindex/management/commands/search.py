"""Search memories the way the dashboard and `/api/search/` do, from the command line.

python manage.py search "lucky number" --scope agent:main
python manage.py search 18600000000 --scope main --retriever bm25 --json
python manage.py search "stop padding your replies" --scope main --retriever vector --limit 10
python manage.py search "when did Maya adopt the dog" --scope user:42 --limit 10 --no-floor
"""

from __future__ import annotations

from django.core.management.base import CommandError

from memoryui import rules
from memoryui.management.base import ReportingCommand
from memoryui.text import shorten
from searchindex.documents import IndexUnavailable
from searchindex.search import RETRIEVERS, SearchError, search


class Command(ReportingCommand):
    help = "Search active memories of a scope (retrieval only: vector, BM25 or both fused)."

    def add_arguments(self, parser):
        parser.add_argument("query", help="what to search for: words in any language, a name, a number, an id")
        parser.add_argument(
            "--scope", action="append", required=True, help="scope to search, repeatable; `main` means agent:main"
        )
        parser.add_argument("--limit", type=int, default=None, help="results, 1..20 (default 5); clamped and stated")
        parser.add_argument("--retriever", choices=RETRIEVERS, default="hybrid", help="default: hybrid")
        parser.add_argument(
            "--no-floor",
            action="store_true",
            help="the raw ranking: do not apply the answerability decision (results may then be unrelated)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")

    def handle(self, *args, **options):
        try:
            scopes = list(dict.fromkeys(rules.normalize_scope(scope) for scope in options["scope"]))
        except rules.ScopeError as exc:
            raise CommandError(f"--scope: {exc}") from None
        try:
            result = search(
                options["query"],
                scopes=scopes,
                limit=options["limit"],
                retriever=options["retriever"],
                floor=not options["no_floor"],
            )
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
        answer = result.answer
        if not result.floor:
            lines.append("raw ranking (--no-floor); the decision would say: " + _verdict(answer))
        else:
            lines.append(_verdict(answer))
        for n, found in enumerate(result.results, 1):
            hit = found.to_dict()
            lines.append(f"{n:>2}. {hit['id']}  {hit['kind']}/{hit['tier']}  score {hit['score']:.4f}  {hit['label']}")
            lines.append(f"    {shorten(found.memory.text, 100)}")
            lines.append(f"    {_ranks(hit)}")
        if result.floor and result.below_floor:
            lines.append("---- below the floor " + "-" * 40)
            for found in result.near_misses:
                hit = found.to_dict()
                lines.append(f"  - {hit['id']}  {shorten(found.memory.text, 70)}")
                lines.append(f"    {_ranks(hit)}; {'; '.join(hit['reasons'])}")
        return "\n".join(lines)


def _verdict(answer) -> str:
    if answer is None:
        return "not answered"
    return ("answered: " if answer.answered else "not answered: ") + answer.reason


def _ranks(hit: dict) -> str:
    vector = (
        f"vector #{hit['vector_rank']} ({hit['vector_similarity']:.3f}, margin {hit['vector_margin']:+.3f})"
        if hit["vector_rank"] and hit["vector_margin"] is not None
        else f"vector #{hit['vector_rank']} ({hit['vector_similarity']:.3f})"
        if hit["vector_rank"]
        else "vector: no match"
    )
    bm25 = (
        f"BM25 #{hit['bm25_rank']} ({hit['bm25_score']:.2f}, covers {hit['bm25_coverage']:.0%})"
        if hit["bm25_rank"]
        else "BM25: no match"
    )
    adjustments = ", ".join(f"{name} {value:+.5f}" for name, value in hit["adjustments"].items() if value)
    shares = " + ".join(f"{name} {value:.3f}" for name, value in hit["contributions"].items())
    return f"{vector}, {bm25}, fused {hit['fused']:.4f} ({shares})" + (f", rerank {adjustments}" if adjustments else "")
