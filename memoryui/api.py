"""REST API views (DRF)."""

from __future__ import annotations

from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class MemoryPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500


ERROR_CODES = {
    status.HTTP_400_BAD_REQUEST: "invalid",
    status.HTTP_401_UNAUTHORIZED: "unauthorized",
    status.HTTP_403_FORBIDDEN: "forbidden",
    status.HTTP_404_NOT_FOUND: "not_found",
    status.HTTP_405_METHOD_NOT_ALLOWED: "method_not_allowed",
    status.HTTP_409_CONFLICT: "conflict",
    status.HTTP_503_SERVICE_UNAVAILABLE: "backend_unavailable",
}


def error_body(status_code: int, message: str, details: dict | None = None, code: str | None = None) -> dict:
    return {
        "error": {
            "code": code or ERROR_CODES.get(status_code, "error"),
            "message": message,
            "details": details or {},
        }
    }


def exception_handler(exc, context):
    """Every API error as {"error": {"code", "message", "details"}}."""
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        # Session-less requests without a token get 401 with the JSON shape, never a redirect.
        response = Response(status=status.HTTP_401_UNAUTHORIZED)
        response["WWW-Authenticate"] = 'Bearer realm="api"'
        response.data = error_body(401, str(exc.detail))
        return response
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = error_body(response.status_code, "Invalid input.", details=detail)
    else:
        message = exc.detail if isinstance(getattr(exc, "detail", None), str) else str(getattr(exc, "detail", exc))
        response.data = error_body(response.status_code, str(message))
    return response
