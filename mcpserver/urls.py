from __future__ import annotations

from django.urls import path

from mcpserver import http

urlpatterns = [path("", http.endpoint, name="mcp")]
