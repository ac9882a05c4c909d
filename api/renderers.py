"""Response renderers of the REST API."""

from __future__ import annotations

from rest_framework import renderers


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSON renderer (UTF-8), which never fails on a lone surrogate in the data.

    JSON can carry a lone UTF-16 surrogate only as an escape ("\\udfff"); UTF-8 cannot encode
    the character. Such data (a row stored before the input checks, a value no JSONField
    decoder saw) is rendered as ASCII-escaped JSON instead: the same JSON value, never a 500.
    """

    def render(self, data, accepted_media_type=None, renderer_context=None):
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return _ASCIIJSONRenderer().render(data, accepted_media_type, renderer_context)


class _ASCIIJSONRenderer(renderers.JSONRenderer):
    ensure_ascii = True
