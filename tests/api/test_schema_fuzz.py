"""Fuzz the API from its own OpenAPI schema against a live server (schemathesis): valid and
invalid requests alike never get a 5xx, and every error body carries a ``code``."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.core.result import Ok

from tests.api.conftest import ALICE

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.mark.parametrize("mode", list(schemathesis.GenerationMode))
def test_no_server_errors_and_every_error_has_a_code(servers, shop, mode):
    schema = schemathesis.openapi.from_url(f"{servers[0].url}/agent/schema/")
    results = list(schema.get_all_operations())
    operations = [result.ok() for result in results if isinstance(result, Ok)]
    assert len(operations) == len(results)
    assert len(operations) >= 6
    fuzzed = 0
    for operation in operations:

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def check(case: schemathesis.Case) -> None:
            headers = {**ALICE, **dict(case.headers or {})}
            response = case.call(headers=headers, timeout=30)
            assert response.status_code < 500, f"{case.method} {case.path}: {response.text}"
            if response.status_code >= 400:
                where = f"{case.as_curl_command()} -> {response.status_code}"
                assert "application/json" in str(response.headers.get("content-type")), (
                    f"{where}: {response.text!r}"
                )
                assert "code" in response.json(), f"{where}: {response.text}"

        try:
            check()
        except Unsatisfiable:
            # Nothing in this operation can be made invalid (e.g. a lone string path parameter).
            assert mode == schemathesis.GenerationMode.NEGATIVE
            continue
        fuzzed += 1
    assert fuzzed >= (len(operations) if mode == schemathesis.GenerationMode.POSITIVE else 3)
