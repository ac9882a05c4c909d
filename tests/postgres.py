"""What exists only on PostgreSQL is tested in the suite's PostgreSQL pass (`.ci/run` runs both)."""

from __future__ import annotations

import pytest
from django.db import connection

needs_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the PostgreSQL BM25 index needs a PostgreSQL database"
)
