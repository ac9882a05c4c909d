"""/api/schema/ (OpenAPI) and /api/docs/ (Swagger UI served from local static files)."""

from __future__ import annotations

import re

import pytest
import yaml
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db

MEMORY_PATHS = {
    "/api/memories/",
    "/api/memories/{id}/",
    "/api/memories/{id}/pin/",
    "/api/memories/{id}/unpin/",
    "/api/memories/{id}/tombstone/",
    "/api/memories/{id}/restore/",
    "/api/memories/{id}/events/",
    "/api/memories/bulk/",
    "/api/events/",
    "/api/stats/",
    "/api/tokens/",
    "/api/tokens/{id}/revoke/",
}


def test_the_schema_is_openapi_json_with_every_memory_path(alice_client):
    response = alice_client.get("/api/schema/", headers={"Accept": "application/json"})
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert set(schema["paths"]) >= MEMORY_PATHS
    assert not any(".*" in path for path in schema["paths"])  # the catch-all route is not documented
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])


def test_the_schema_is_yaml_by_default(alice_client):
    response = alice_client.get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert set(schema["paths"]) >= MEMORY_PATHS


def test_the_schema_documents_the_merged_answer_and_the_error_shape(alice_client):
    schema = alice_client.get("/api/schema/", headers={"Accept": "application/json"}).json()
    create = schema["paths"]["/api/memories/"]["post"]["responses"]
    assert {"200", "201", "400", "403"} <= set(create)
    result = schema["components"]["schemas"]["MemoryWriteResult"]["properties"]
    assert {"merged", "merged_into"} <= set(result)
    error = schema["components"]["schemas"]["Error"]["properties"]["error"]
    assert error["$ref"].endswith("/ErrorDetail")
    kinds = schema["components"]["schemas"]["KindEnum"]["enum"]
    assert "project_state" in kinds and "note" in kinds


def test_the_schema_generates_without_warnings(tmp_path):
    # --fail-on-warn turns any unresolvable serializer or enum clash into an error.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/memories/{id}/" in (tmp_path / "schema.yaml").read_text()


def test_the_docs_page_uses_local_assets_only(alice_client):
    response = alice_client.get("/api/docs/", headers={"Accept": "text/html"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui-bundle.js" in html
    external = [url for url in re.findall(r"https?://[^\s\"'<>]+", html) if not url.startswith("http://testserver/")]
    assert external == []
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
    assert len(assets) >= 3
    for asset in assets:
        assert alice_client.get(asset).status_code == 200, asset


def test_the_docs_point_at_the_schema(alice_client):
    html = alice_client.get("/api/docs/").content.decode()
    assert '"/api/schema/"' in html


def test_anonymous_docs_send_a_browser_to_sign_in_and_a_json_client_a_401(client):
    response = client.get("/api/docs/", headers={"Accept": "text/html"})
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/api/docs/")
    response = Client().get("/api/docs/", headers={"Accept": "application/json"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
