"""OAuth discovery for MCP clients: what a client that got a 401 from `/mcp/` finds at `/.well-known/`.

MCP clients follow a 401 with OAuth discovery: the protected resource's metadata (RFC 9728), then
its authorization server's (RFC 8414, or OpenID Connect's). memoryui is a resource server only: its
keys are API tokens made in the dashboard (`/tokens/`) or by `manage.py api_token create`, sent as
`Authorization: Bearer <key>`, and no OAuth authorization server issues them. So:

- `/.well-known/oauth-protected-resource` (and its path-inserted form for `/mcp/`) is the resource's
  metadata: the resource, bearer tokens in the `Authorization` header, and no `authorization_servers`;
- the authorization server's metadata paths answer the API's JSON 404 saying where keys come from.

Both are JSON, never the dashboard's HTML 404 page.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.urls import re_path
from django.views.decorators.http import require_safe

from memoryui.errors import error_body

RESOURCE_PATH = "/mcp/"
NO_AUTHORIZATION_SERVER = (
    "memoryui is not an OAuth authorization server: send an API token made in the dashboard (/tokens/) or with "
    "`manage.py api_token create` as `Authorization: Bearer <key>`."
)


@require_safe
def protected_resource(request) -> JsonResponse:
    """RFC 9728 metadata of the MCP endpoint."""
    metadata = {
        "resource": request.build_absolute_uri(RESOURCE_PATH),
        "bearer_methods_supported": ["header"],
        "resource_name": "memoryui MCP server",
        "resource_documentation": request.build_absolute_uri("/api/docs/"),
    }
    return JsonResponse(metadata, headers={"Cache-Control": "public, max-age=3600"})


@require_safe
def no_authorization_server(request) -> JsonResponse:
    return JsonResponse(error_body(404, NO_AUTHORIZATION_SERVER), status=404)


urlpatterns = [
    # The resource's own document, at the root and path-inserted for /mcp/ (RFC 9728 §3.1).
    re_path(r"^oauth-protected-resource(?:/mcp/?)?$", protected_resource, name="oauth_protected_resource"),
    # RFC 8414 and OpenID Connect discovery, at the root or path-inserted.
    re_path(r"^(?:oauth-authorization-server|openid-configuration)(?:/.*)?$", no_authorization_server),
]
