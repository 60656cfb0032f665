"""Fuzz the whole API from its own OpenAPI schema against a live daphne (schemathesis, every
phase: examples, coverage, fuzzing, stateful links), as the owner of a waiting run and as its
approver, with real tokens. Any 5xx fails, and so does any answer the schema does not describe
(status, content type, body, headers) or a request accepted without its credentials. Half the
bodies of the first three phases carry lone surrogates in their strings
(``tests/live/surrogates.py``): each a 400. The stateful phase runs after them, unspoiled:
schemathesis re-validates a body a link has changed with a validator that cannot encode a lone
surrogate (``UnicodeEncodeError: surrogates not allowed``), which it reports as a runtime error of
its own, not the server's (seen in ``.ci/run``).

Left out: ``positive_data_acceptance`` and ``negative_data_rejection``. A schema-valid request
is often refused on purpose (an id nobody minted: 404; a decided call: 409) and DRF ignores a
malformed ``page_size`` by design; both are business answers, documented, not defects.

The default run is bounded (``FUZZ_EXAMPLES``); ``-m fuzz`` selects the larger run too (the
default ``make test`` runs both; CI as well).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from rest_framework.authtoken.models import Token

from tests.factories import make_user
from tests.live.server import Server, start_server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FUZZ_EXAMPLES = 6
LARGE_FUZZ_EXAMPLES = 15
SKIPPED_CHECKS = "positive_data_acceptance,negative_data_rejection"
SPOILING = {**os.environ, "SCHEMATHESIS_HOOKS": str(Path(__file__).with_name("surrogates.py"))}
# The phases run one round after the other, with the environment each needs (see above).
ROUNDS = (("examples,coverage,fuzzing", SPOILING), ("stateful", dict(os.environ)))


@pytest.fixture(scope="module")
def token_server(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """daphne with the production resolver (Django users, tokens) and the demo policy."""
    server = start_server(
        tmp_path_factory.mktemp("fuzz") / "daphne.log",
        AIRLOCK_ACTOR_RESOLVER="agent_core.actors.DjangoAuthResolver",
        AIRLOCK_TEST_APPROVAL_POLICY="demo.policy.DemoPolicy",
    )
    yield server
    server.stop()


def _token(name: str, *groups: str) -> str:
    return Token.objects.create(user=make_user(name, *groups)).key


@pytest.fixture
def tokens(token_server: Server, shop: None) -> dict[str, str]:
    """alice owns a run waiting on finance, a purge waiting on herself and a question; fran is
    in finance."""
    keys = {"owner": _token("alice"), "approver": _token("fran", "finance")}
    owner = {"Authorization": f"Token {keys['owner']}"}
    for line in (
        '/call issue_refund {"order_id": "A-1001", "amount": 120}',
        '/call purge_cache {"path": "/products"}',
        '/call ask_user {"question": "Which order?"}',
    ):
        response = httpx.post(
            f"{token_server.url}/agent/chat",
            json={"agent": "support", "message": line},
            headers=owner,
            timeout=30,
        )
        assert response.status_code == 202, response.text
    return keys


def _command(
    server: Server, config: Path, phases: str, examples: int, seed: int | None
) -> list[str]:
    return [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file",
        str(config),
        "run",
        f"{server.url}/agent/schema/?format=json",
        "--phases",
        phases,
        "--checks",
        "all",
        "--exclude-checks",
        SKIPPED_CHECKS,
        "--max-examples",
        str(examples),
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--no-color",
        *(["--seed", str(seed)] if seed is not None else []),
    ]


def fuzz(
    server: Server, tokens: dict[str, str], where: Path, examples: int, seed: int | None
) -> None:
    """Each round of phases, one schemathesis run per actor side by side; each must find
    nothing."""
    # drf-spectacular builds the schema lazily, and two first builds at once are not safe.
    httpx.get(f"{server.url}/agent/schema/?format=json", timeout=120).raise_for_status()
    for phases, env in ROUNDS:
        runs = {}
        for actor, token in tokens.items():
            # Given as the schema's own tokenAuth scheme (not a bare header), so the
            # ignored_auth check knows which credentials to withhold.
            config = where / f"{actor}.toml"
            config.write_text(f'[auth.openapi.tokenAuth]\napi_key = "Token {token}"\n')
            log = where / f"{actor}-{phases.replace(',', '-')}.log"
            with log.open("wb") as out:
                command = _command(server, config, phases, examples, seed)
                # Run in the test's directory: schemathesis keeps a cache where it runs.
                process = subprocess.Popen(
                    command, cwd=where, stdout=out, stderr=subprocess.STDOUT, env=env
                )
                runs[actor] = (process, log)
        _check(runs, phases)


def _check(runs: dict[str, tuple[subprocess.Popen[bytes], Path]], phases: str) -> None:
    """Wait for the round's runs: each ran every phase and found nothing."""
    try:
        returncodes = {actor: process.wait(timeout=900) for actor, (process, _) in runs.items()}
    finally:  # none left running to fail a later test (a ResourceWarning at its teardown)
        for process, _ in runs.values():
            process.kill()
            process.wait()
    for actor, (_, log) in runs.items():
        report = log.read_text()
        assert returncodes[actor] == 0, f"as the {actor}:\n{_errors(report)}{report[-20_000:]}"
        assert all(phase.capitalize() in report for phase in phases.split(","))


def _errors(report: str) -> str:
    """The report's ERRORS section, first: a long report's tail may not show it."""
    start, end = report.find("== ERRORS =="), report.find("== WARNINGS ==")
    return report[start:end] + "\n" if start >= 0 else ""


def test_the_schema_holds_for_every_input(token_server, tokens, tmp_path):
    fuzz(token_server, tokens, tmp_path, FUZZ_EXAMPLES, seed=12)


@pytest.mark.fuzz
# As long as ``fuzz`` waits for schemathesis: each generated request for the stream of a run
# that waits on a person stays open until the fuzzer's 30 s request timeout, and how many a
# random seed generates varies (98 s here, over 300 s once in .ci/run, where the default
# timeout stopped the server under a hanging stream and the fuzzer reported it unavailable).
@pytest.mark.timeout(1000)
def test_the_schema_holds_for_many_more_inputs(token_server, tokens, tmp_path):
    fuzz(token_server, tokens, tmp_path, LARGE_FUZZ_EXAMPLES, seed=None)
