"""REST routes of the read path, included under /api/recall/ (in the `api` namespace) by api.urls."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from api import recall

router = SimpleRouter(use_regex_path=False)
router.register("traces", recall.RecallTraceViewSet, basename="recall-trace")
router.register("profiles", recall.RecallProfileViewSet, basename="recall-profile")
router.register("golden", recall.GoldenSetViewSet, basename="recall-golden")

urlpatterns = [
    path("", recall.RecallView.as_view(), name="recall"),
    *router.urls,
]
