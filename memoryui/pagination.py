"""API pagination, in its own module: DRF imports DEFAULT_PAGINATION_CLASS while `rest_framework.generics`
loads, so it cannot live in memoryui.api (which imports generics) without an import cycle.
"""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination


class MemoryPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500
