"""Routes of the recall pages under /recall/."""

from __future__ import annotations

from django.urls import path

from web import views_recall

app_name = "recall"

urlpatterns = [
    path("", views_recall.playground, name="playground"),
    path("llm/", views_recall.llm_setup, name="llm_setup"),
    path("traces/", views_recall.trace_list, name="trace_list"),
    path("traces/save/", views_recall.trace_save, name="trace_save"),
    path("traces/compare/", views_recall.trace_compare, name="trace_compare"),
    path("traces/<uuid:pk>/", views_recall.trace_detail, name="trace"),
    path("profiles/", views_recall.profile_list, name="profile_list"),
    path("profiles/new/", views_recall.profile_edit, name="profile_create"),
    path("profiles/<slug:name>/edit/", views_recall.profile_edit, name="profile_edit"),
    path("golden/", views_recall.golden_list, name="golden_list"),
    path("golden/<int:pk>/", views_recall.golden_detail, name="golden_detail"),
    path("golden/<int:pk>/run/", views_recall.golden_run, name="golden_run"),
    path("golden/<int:pk>/calibrate/", views_recall.golden_calibrate, name="golden_calibrate"),
    path(
        "golden/<int:pk>/queries/<int:query_pk>/delete/", views_recall.golden_query_delete, name="golden_query_delete"
    ),
]
