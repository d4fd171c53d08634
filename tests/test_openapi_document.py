"""The OpenAPI document says what the API answers: real bodies, bounds, the bearer scheme, and
in words the rules that OpenAPI cannot state."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ductwork.contract import paths
from ductwork.contract.params import MAX_COUNT, MAX_INTEGER
from ductwork.streams.registry import INDOOR_MODELS, SUBMITTALS
from tests.conftest import ReadApi


@pytest.fixture(scope="module")
def document(read_api: ReadApi) -> dict[str, Any]:
    """The served document, read with the session's key (it holds the ops scope)."""
    headers = {"Authorization": f"Bearer {read_api.key}"}
    answer = httpx.get(f"{read_api.url}/openapi.json", headers=headers)
    assert answer.status_code == 200
    return answer.json()


def operations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(path, item["get"]) for path, item in document["paths"].items()]


def test_every_answer_of_every_operation_has_a_real_schema(document: dict[str, Any]) -> None:
    assert len(operations(document)) >= 27
    for path, operation in operations(document):
        for status, answer in operation["responses"].items():
            content = answer.get("content")
            assert content, (path, status)
            for media_type, body in content.items():
                schema = body.get("schema")
                if media_type.startswith("text/"):
                    continue  # Prometheus text
                assert schema and (schema.get("properties") or schema.get("type")), (path, status)
                assert set(schema) - {"title", "description"}, (path, status, schema)


def test_every_keyed_operation_declares_the_bearer_scheme(document: dict[str, Any]) -> None:
    scheme = document["components"]["securitySchemes"]["bearerAuth"]
    assert scheme == {**scheme, "type": "http", "scheme": "bearer"}
    for path, operation in operations(document):
        open_path = path in ("/healthz", "/readyz", INDOOR_MODELS.path)
        expected = [] if open_path else [{"bearerAuth": []}]
        assert operation["security"] == expected, path
        if not open_path:
            assert {"401", "403"} <= set(operation["responses"]), path
            unauthorized = operation["responses"]["401"]
            assert unauthorized["headers"]["WWW-Authenticate"]["required"] is True


def test_every_integer_parameter_states_its_bounds(document: dict[str, Any]) -> None:
    seen = set()
    for path, operation in operations(document):
        for parameter in operation.get("parameters", []):
            schema = parameter["schema"]
            if schema.get("type") == "integer":
                seen.add(parameter["name"])
                assert "minimum" in schema and "maximum" in schema, (path, parameter["name"])
            if parameter["name"] == "page":
                assert schema["maximum"] == MAX_INTEGER
            if parameter["name"] == "count":
                assert schema["maximum"] == MAX_COUNT
    assert seen == {"page", "count", "relationship_id", "limit", "wait"}


@pytest.mark.parametrize(
    ("path", "words"),
    [
        (SUBMITTALS.path, "At least one of `idu` and `odu`"),
        (paths.LEADS, "`cursorCreatedDate` and `cursorId` come together"),
    ],
)
def test_a_rule_openapi_cannot_state_is_written_in_its_operation(
    document: dict[str, Any], path: str, words: str
) -> None:
    assert words in document["paths"][path]["get"]["description"]
