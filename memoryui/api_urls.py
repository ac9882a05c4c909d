"""REST API routes under /api/."""

from __future__ import annotations

urlpatterns: list = []
