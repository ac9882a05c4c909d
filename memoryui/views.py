"""HTML views (function-based); each renders the full page or, for htmx, its partial."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse


@login_required
def dashboard(request):
    return HttpResponse("memoryui")


def not_found(request, exception=None):
    return HttpResponse("Not found", status=404)


def server_error(request):
    return HttpResponse("Server error", status=500)
