"""API rate limits: counted per API token when a token made the call, else per signed-in user.

Two limits, both named in settings and read when a request arrives (so `override_settings` and a
changed environment take effect without a restart of the class): every call counts against
MEMORYUI_API_RATE; calls to views marked `throttle_scope = "expensive"` (recall, golden-set runs)
also count against the lower MEMORYUI_API_EXPENSIVE_RATE. A refused call is a 429 whose JSON error
has the code `throttled` and whose `Retry-After` header says when to try again.

The history of calls lives in Django's cache: a per-process memory cache unless CACHES names a
shared one, so several web processes each count on their own until it is Redis or the like.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from memoryui.models import ApiToken

EXPENSIVE = "expensive"


def caller_ident(request) -> str | None:
    """Who a call is counted against: its token, else its user; None for an anonymous caller."""
    if isinstance(request.auth, ApiToken):
        return f"token:{request.auth.pk}"
    if request.user and request.user.is_authenticated:
        return f"user:{request.user.pk}"
    return None


class ApiRateThrottle(SimpleRateThrottle):
    """Every API call, per token or user (anonymous callers, who only ever get a 401, per address)."""

    scope = "api"
    rate_setting = "MEMORYUI_API_RATE"

    def get_rate(self) -> str | None:
        # Read at call time, not at import as DRF's THROTTLE_RATES are: settings overrides apply.
        return getattr(settings, self.rate_setting, None) or None

    def get_cache_key(self, request, view) -> str:
        ident = caller_ident(request) or f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class ExpensiveRateThrottle(ApiRateThrottle):
    """The lower rate of views with `throttle_scope = "expensive"`; other views are not counted here."""

    scope = EXPENSIVE
    rate_setting = "MEMORYUI_API_EXPENSIVE_RATE"

    def allow_request(self, request, view) -> bool:
        if getattr(view, "throttle_scope", None) != EXPENSIVE:
            return True
        return super().allow_request(request, view)
