"""REST API routes under /api/. The last route answers every unknown URL with a JSON 404."""

from __future__ import annotations

from django.urls import include, path, re_path
from rest_framework.routers import SimpleRouter

from api import transcripts, views

app_name = "api"

# Path converters (<uuid:pk>, <int:pk>) so a malformed id never reaches a view: it falls
# through to the JSON 404 below.
router = SimpleRouter(use_regex_path=False)
router.register("memories", views.MemoryViewSet, basename="memory")
router.register("tokens", views.TokenViewSet, basename="token")

urlpatterns = [
    *router.urls,
    path("events/", views.EventListView.as_view(), name="event-list"),
    path("stats/", views.StatsView.as_view(), name="stats"),
    path("search/", views.SearchView.as_view(), name="search"),
    path("transcripts/", transcripts.TranscriptListView.as_view(), name="transcript-list"),
    # A transcript is named by memoryui's UUID or by the agent's own id, which may hold any character.
    path("transcripts/<path:pk>/extract/", transcripts.TranscriptExtractView.as_view(), name="transcript-extract"),
    path("transcripts/<path:pk>/", transcripts.TranscriptDetailView.as_view(), name="transcript-detail"),
    path("tasks/", transcripts.TaskListView.as_view(), name="task-list"),
    path("tasks/<uuid:pk>/", transcripts.TaskDetailView.as_view(), name="task-detail"),
    # The read path's routes are its own (api.urls_recall); their names stay in this namespace.
    path("recall/", include("api.urls_recall")),
    path("schema/", views.SchemaView.as_view(), name="schema"),
    path("docs/", views.DocsView.as_view(), name="docs"),
    re_path(r"^.*$", views.ApiNotFoundView.as_view(), name="not-found"),
]
