"""URL routes: the dashboard pages, the back office, accounts and the REST API."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.utils.functional import lazy
from django.views.generic import RedirectView

from web import scopes, views, views_hygiene, views_import, views_transcripts

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("memories/", views.memory_list, name="memory_list"),
    path("memories/new/", views.memory_create, name="memory_create"),
    path("memories/bulk/", views.memory_bulk, name="memory_bulk"),
    path("memories/import/", views_import.memory_import, name="memory_import"),
    path("memories/<uuid:pk>/", views.memory_detail, name="memory_detail"),
    path("memories/<uuid:pk>/edit/", views.memory_edit, name="memory_edit"),
    path("memories/<uuid:pk>/<slug:action>/", views.memory_action, name="memory_action"),
    path("indexes/<slug:action>/", views.index_action, name="index_action"),
    path("transcripts/", views_transcripts.transcript_list, name="transcript_list"),
    path("transcripts/<uuid:pk>/", views_transcripts.transcript_detail, name="transcript_detail"),
    path("transcripts/<uuid:pk>/download/", views_transcripts.transcript_download, name="transcript_download"),
    path("transcripts/<uuid:pk>/extract/", views_transcripts.transcript_extract, name="transcript_extract"),
    path("transcripts/<uuid:pk>/dry-run/", views_transcripts.transcript_dry_run, name="transcript_dry_run"),
    path("duplicates/", views_hygiene.duplicates, name="duplicates"),
    path("duplicates/merge/", views_hygiene.duplicates_merge, name="duplicates_merge"),
    path("duplicates/reject/", views_hygiene.duplicates_reject, name="duplicates_reject"),
    path("duplicates/apply/", views_hygiene.duplicates_apply, name="duplicates_apply"),
    path("cleanup/", views_hygiene.cleanup_wizard, name="cleanup"),
    path("cleanup/apply/", views_hygiene.cleanup_apply, name="cleanup_apply"),
    path("cleanup/undo/", views_hygiene.cleanup_undo, name="cleanup_undo"),
    path("batches/<uuid:batch>/undo/", views_hygiene.batch_undo, name="batch_undo"),
    path("tasks/", views_transcripts.task_list, name="task_list"),
    path("tasks/decay/", views_transcripts.task_decay_now, name="task_decay_now"),
    path("tasks/<uuid:pk>/", views_transcripts.task_detail, name="task_detail"),
    path("tasks/<uuid:pk>/<slug:action>/", views_transcripts.task_action, name="task_action"),
    path("recall/", include("web.urls_recall")),
    path("scopes/", scopes.picker, name="scope_picker"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("api.urls")),
    path("mcp/", include("mcpserver.urls")),
    path(".well-known/", include("mcpserver.discovery")),
    # Browsers ask for /favicon.ico whatever a page links: the icon base.html links.
    path("favicon.ico", RedirectView.as_view(url=lazy(static, str)("memoryui/favicon.svg"), permanent=True)),
]

handler400 = "web.views.bad_request"  # a body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413 there
handler404 = "web.views.not_found"
handler500 = "web.views.server_error"
