"""Routes of the recall pages under /recall/."""

from __future__ import annotations

from django.urls import path

from recall import views

app_name = "recall"

urlpatterns = [
    path("", views.playground, name="playground"),
    path("llm/", views.llm_setup, name="llm_setup"),
    path("traces/", views.trace_list, name="trace_list"),
    path("traces/save/", views.trace_save, name="trace_save"),
    path("traces/<uuid:pk>/", views.trace_detail, name="trace"),
    path("profiles/", views.profile_list, name="profile_list"),
    path("profiles/new/", views.profile_edit, name="profile_create"),
    path("profiles/<slug:name>/edit/", views.profile_edit, name="profile_edit"),
    path("golden/", views.golden_list, name="golden_list"),
    path("golden/<int:pk>/", views.golden_detail, name="golden_detail"),
    path("golden/<int:pk>/run/", views.golden_run, name="golden_run"),
    path("golden/<int:pk>/calibrate/", views.golden_calibrate, name="golden_calibrate"),
    path("golden/<int:pk>/queries/<int:query_pk>/delete/", views.golden_query_delete, name="golden_query_delete"),
]
