"""REST API routes under /api/. The last route answers every unknown URL with a JSON 404."""

from __future__ import annotations

from django.urls import include, path, re_path
from rest_framework.routers import SimpleRouter

from memoryui import api, api_transcripts

app_name = "api"

# Path converters (<uuid:pk>, <int:pk>) so a malformed id never reaches a view: it falls
# through to the JSON 404 below.
router = SimpleRouter(use_regex_path=False)
router.register("memories", api.MemoryViewSet, basename="memory")
router.register("tokens", api.TokenViewSet, basename="token")

urlpatterns = [
    *router.urls,
    path("events/", api.EventListView.as_view(), name="event-list"),
    path("stats/", api.StatsView.as_view(), name="stats"),
    path("search/", api.SearchView.as_view(), name="search"),
    path("transcripts/", api_transcripts.TranscriptListView.as_view(), name="transcript-list"),
    # A transcript is named by memoryui's UUID or by the agent's own id, which may hold any character.
    path("transcripts/<path:pk>/extract/", api_transcripts.TranscriptExtractView.as_view(), name="transcript-extract"),
    path("transcripts/<path:pk>/", api_transcripts.TranscriptDetailView.as_view(), name="transcript-detail"),
    path("tasks/", api_transcripts.TaskListView.as_view(), name="task-list"),
    path("tasks/<uuid:pk>/", api_transcripts.TaskDetailView.as_view(), name="task-detail"),
    # The read path's routes are its own (recall.api_urls); their names stay in this namespace.
    path("recall/", include("recall.api_urls")),
    path("schema/", api.SchemaView.as_view(), name="schema"),
    path("docs/", api.DocsView.as_view(), name="docs"),
    re_path(r"^.*$", api.ApiNotFoundView.as_view(), name="not-found"),
]
