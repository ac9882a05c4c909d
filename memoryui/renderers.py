"""Response renderers of the REST API."""

from __future__ import annotations

from rest_framework import renderers


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSON renderer (safe rendering of bad stored rows to come)."""
