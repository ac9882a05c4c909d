"""URL routes: the dashboard pages, the back office, accounts and the REST API."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from memoryui import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("memories/", views.memory_list, name="memory_list"),
    path("memories/new/", views.memory_create, name="memory_create"),
    path("memories/bulk/", views.memory_bulk, name="memory_bulk"),
    path("memories/<uuid:pk>/", views.memory_detail, name="memory_detail"),
    path("memories/<uuid:pk>/edit/", views.memory_edit, name="memory_edit"),
    path("memories/<uuid:pk>/<slug:action>/", views.memory_action, name="memory_action"),
    path("indexes/<slug:action>/", views.index_action, name="index_action"),
    path("transcripts/", views.transcript_list, name="transcript_list"),
    path("transcripts/<uuid:pk>/", views.transcript_detail, name="transcript_detail"),
    path("transcripts/<uuid:pk>/extract/", views.transcript_extract, name="transcript_extract"),
    path("tasks/", views.task_list, name="task_list"),
    path("tasks/<uuid:pk>/", views.task_detail, name="task_detail"),
    path("recall/", include("recall.urls")),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("memoryui.api_urls")),
]

handler404 = "memoryui.views.not_found"
handler500 = "memoryui.views.server_error"
