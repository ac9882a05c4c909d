"""API pagination, in its own module: DRF imports DEFAULT_PAGINATION_CLASS while `rest_framework.generics`
loads, so it cannot live in api.views (which imports generics) without an import cycle.
"""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.pagination import PageNumberPagination


def _positive(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise exceptions.ValidationError({name: [f"must be a whole number of 1 or more, got {raw[:40]!r}"]})
    return value


class MemoryPagination(PageNumberPagination):
    """DRF's page numbers, with a bad `page` or `page_size` a 400 naming it (DRF answers 404
    "Invalid page." for `page=-1` and silently ignores `page_size=abc`); a page past the last
    one is still a 404, saying how many pages there are. `page_size` above the maximum is cut
    to it, as DRF does."""

    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request):
        raw = request.query_params.get(self.page_size_query_param, "").strip()
        if raw:
            return min(_positive(self.page_size_query_param, raw), self.max_page_size)
        return self.page_size

    def get_page_number(self, request, paginator):
        raw = request.query_params.get(self.page_query_param, "").strip()
        if not raw:
            return 1
        if raw in self.last_page_strings:
            return paginator.num_pages
        number = _positive(self.page_query_param, raw)
        if number > paginator.num_pages:
            pages = paginator.num_pages
            raise exceptions.NotFound(
                f"Invalid page: page {number} is past the last page ({pages} page{'s' if pages != 1 else ''})."
            )
        return number
