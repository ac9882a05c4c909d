"""REST routes of the read path, included under /api/recall/ (in the `api` namespace) by memoryui.api_urls."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from recall import api

router = SimpleRouter(use_regex_path=False)
router.register("traces", api.RecallTraceViewSet, basename="recall-trace")
router.register("profiles", api.RecallProfileViewSet, basename="recall-profile")
router.register("golden", api.GoldenSetViewSet, basename="recall-golden")

urlpatterns = [
    path("", api.RecallView.as_view(), name="recall"),
    *router.urls,
]
