"""URL routes: the dashboard pages, the back office, accounts and the REST API."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from memoryui import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", include("memoryui.api_urls")),
]

handler404 = "memoryui.views.not_found"
handler500 = "memoryui.views.server_error"
