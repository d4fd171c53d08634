"""schemathesis against the read API's own OpenAPI: no 5xx, no answer outside the document."""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ductwork.settings import HomeSettings, ServeSettings
from serve.app import create_app
from tests.conftest import ReadApi

EXAMPLES_PER_OPERATION = 25
# Every conformance check but "schema-valid data is accepted": OpenAPI cannot say that the two
# lead cursor parameters come together, so a lone one is schema-valid yet rightly a 400.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def test_no_generated_request_gets_a_server_error_or_an_undocumented_answer(
    read_api: ReadApi,
) -> None:
    # No cooldown ends during the run; no key limit cuts the generated requests short.
    limits = ServeSettings(serve_pim_cooldown_s=1e9, serve_key_requests_per_second=1_000_000)
    app = create_app(HomeSettings(home=read_api.home), limits)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    headers = {"Authorization": f"Bearer {read_api.key}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    for operation in operations:
        if operation.path.endswith("pim-image-sync"):
            continue  # starts a real job; covered by its own test

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        fuzz()
