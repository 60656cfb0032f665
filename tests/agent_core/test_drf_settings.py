"""The API answers the same whatever the project's REST_FRAMEWORK says: its views carry their
own DRF classes, configurable through AGENT["API_*"]."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

# A project that set DRF up for its own, different API.
HOSTILE = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_SCHEMA_CLASS": "rest_framework.schemas.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.TemplateHTMLRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.FormParser"],
}


@pytest.fixture
def token_client() -> APIClient:
    alice = User.objects.create_user("alice")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    return client


@override_settings(REST_FRAMEWORK=HOSTILE)
def test_token_auth_permissions_errors_and_json_whatever_rest_framework_says(token_client):
    assert token_client.get("/agent/threads").json()["results"] == []
    started = token_client.post("/agent/chat", {"agent": "support", "message": "hi"}, "json")
    assert started.status_code == 202 and started.json()["run_id"].startswith("run_")
    invalid = token_client.post("/agent/chat", {"agent": 5}, "json")
    assert invalid.status_code == 400 and invalid.json()["code"] == "invalid"
    anonymous = APIClient().get("/agent/threads")
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "not_authenticated"
    missing = token_client.get("/agent/runs/run_nope")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"


@override_settings(REST_FRAMEWORK=HOSTILE)
def test_the_schema_is_drf_spectacular_s_and_describes_the_sse_stream():
    response = APIClient().get("/agent/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    stream = response.json()["paths"]["/agent/chat/{run_id}/stream"]["get"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    where = {(p["name"], p["in"]) for p in stream["parameters"]}
    assert {("run_id", "path"), ("after", "query"), ("Last-Event-ID", "header")} <= where
    assert {"400", "401", "404"} <= set(stream["responses"])


def test_the_docs_page_serves_swagger_ui_from_static_files():
    page = APIClient().get("/agent/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn" not in html.lower()


def _teapot(exc: Exception, context: dict[str, Any]) -> Response:
    return Response({"code": "teapot", "detail": str(exc)}, status=418)


@override_settings(
    AGENT={
        "AGENTS": ["demo.agents.support_agent"],
        "API_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
        "API_EXCEPTION_HANDLER": "tests.agent_core.test_drf_settings._teapot",
    }
)
def test_the_classes_come_from_agent(token_client):
    refused = token_client.get("/agent/threads")  # token auth is not configured any more
    assert refused.status_code == 418 and refused.json()["code"] == "teapot"
