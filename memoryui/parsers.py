"""Request parsers of the REST API."""

from __future__ import annotations

from rest_framework import parsers


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser (checks of untrusted input to come)."""
