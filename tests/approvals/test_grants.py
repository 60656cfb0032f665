"""Grants that only narrow (SPEC §19): a scope's pins, uses and ttl; a scope wider than the call
that was approved is refused; uses are counted atomically, under concurrent calls too."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from agent_core import ids
from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from approvals import grants
from approvals import services as port
from approvals.exceptions import GrantWiderThanCall, InvalidDecision
from approvals.models import GrantUse, RememberedApproval
from tests.approvals.rest import actor, client_for
from tests.conftest import ALICE, calls_of

pytestmark = pytest.mark.django_db


def purge(path: str) -> str:
    return f'/call purge_cache {{"path": "{path}"}}'


PRODUCTS = grants.Scope(args={"path": "/products/*"}, uses=5)


def test_a_narrowed_grant_covers_only_matching_calls_and_counts_its_uses(turn, decide):
    first = turn(purge("/products/shoes"))
    [call] = calls_of(first)
    decide(port.approve, call.pk, actor=ALICE, remember=grants.Scope(args=PRODUCTS.args, uses=2))
    grant = RememberedApproval.objects.get()
    assert (grant.arg_pins, grant.uses, grant.uses_left) == ({"path": "/products/*"}, 2, 2)

    covered = calls_of(turn(purge("/products/hats"), thread_id=first.thread_id))[0]
    assert (covered.status, covered.decided_via) == (CallStatus.SUCCEEDED, "remembered")
    outside = calls_of(turn(purge("/checkout"), thread_id=first.thread_id))[0]
    assert outside.status == CallStatus.PENDING_APPROVAL  # the pin does not match: it asks
    decide(port.reject, outside.pk, actor=ALICE, reason="no")
    second = calls_of(turn(purge("/products/socks"), thread_id=first.thread_id))[0]
    assert second.decided_via == "remembered"
    grant.refresh_from_db()
    assert grant.uses_left == 0 and not grant.is_active
    used_up = calls_of(turn(purge("/products/ties"), thread_id=first.thread_id))[0]
    assert used_up.status == CallStatus.PENDING_APPROVAL  # no uses left: it asks again
    assert [u.tool_call_id for u in grant.covered.all()] == [covered.pk, second.pk]


def test_a_grant_past_its_ttl_covers_nothing(turn, decide):
    first = turn(purge("/products/shoes"))
    scope = grants.Scope(args={"path": "/products/*"}, ttl=timedelta(seconds=60))
    decide(port.approve, calls_of(first)[0].pk, actor=ALICE, remember=scope)
    grant = RememberedApproval.objects.get()
    assert grant.expires_at is not None
    assert grant.expires_at - grant.created_at < timedelta(seconds=61)
    RememberedApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    later = calls_of(turn(purge("/products/hats"), thread_id=first.thread_id))[0]
    assert later.status == CallStatus.PENDING_APPROVAL


@pytest.mark.parametrize(
    "scope",
    [
        {"args": {"path": "/checkout/*"}},  # does not match the approved call's path
        {"args": {"region": "eu"}},  # a field the approved call does not have
        {"args": {"path": "/products/shoes"}, "ttl": 10**7},  # longer than REMEMBER_TTL
    ],
)
@override_settings(APPROVALS={"REMEMBER_TTL": 3600})
def test_a_scope_wider_than_the_call_is_refused_and_changes_nothing(turn, people, scope):
    run = turn(purge("/products/shoes"), actor=actor(people["alice"]))
    [call] = calls_of(run)
    response = client_for(people["alice"]).post(
        "/agent/tool-call/approve", {"tool_call_id": call.pk, "remember": scope}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "grant_wider_than_call"
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL and not RememberedApproval.objects.exists()


def test_the_pins_are_checked_against_the_edited_args(turn, decide):
    [call] = calls_of(turn(purge("/products/shoes")))
    with pytest.raises(GrantWiderThanCall):
        decide(port.approve, call.pk, actor=ALICE, args={"path": "/checkout"}, remember=PRODUCTS)
    decide(port.approve, call.pk, actor=ALICE, args={"path": "/products/hats"}, remember=PRODUCTS)
    assert RememberedApproval.objects.get().arg_pins == {"path": "/products/*"}


def test_the_api_takes_a_scope_and_lists_it_with_the_calls_it_covered(turn, people, post):
    first = turn(purge("/products/shoes"), actor=actor(people["alice"]))
    [call] = calls_of(first)
    body = {"tool_call_id": call.pk, "remember": {"args": {"path": "/products/*"}, "uses": 5}}
    status, _ = post(people["alice"], "/agent/tool-call/approve", body)
    assert status == 200
    covered = calls_of(
        turn(purge("/products/hats"), thread_id=first.thread_id, actor=actor(people["alice"]))
    )[0]
    [listed] = client_for(people["alice"]).get("/agent/remembered").json()
    assert listed["scope"]["args"] == {"path": "/products/*"} and listed["scope"]["uses"] == 5
    assert (listed["uses_left"], listed["covered"]) == (4, [covered.pk])


@pytest.mark.parametrize(
    "remember",
    ["yes", {"uses": 0}, {"args": ["path"]}, {"ttl": "1h"}, {"colour": "red"}],
)
def test_a_malformed_scope_is_a_400(turn, people, remember):
    [call] = calls_of(turn(purge("/products/shoes"), actor=actor(people["alice"])))
    response = client_for(people["alice"]).post(
        "/agent/tool-call/approve", {"tool_call_id": call.pk, "remember": remember}, format="json"
    )
    assert response.status_code == 400
    call.refresh_from_db()
    assert call.status == CallStatus.PENDING_APPROVAL


def test_pins_match_exact_values_and_globs_on_strings():
    assert grants.matches({"path": "/products/*"}, {"path": "/products/a/b"})
    assert not grants.matches({"path": "/products/*"}, {"path": "/product"})
    assert grants.matches({"n": 5}, {"n": 5}) and not grants.matches({"n": 5}, {"n": "5"})
    assert not grants.matches({"n": "*"}, {"n": 5})  # a glob matches strings only
    assert not grants.matches({"x": "a"}, {})
    with pytest.raises(InvalidDecision):
        grants.parse({"uses": True})


@pytest.mark.django_db(transaction=True)
def test_concurrent_calls_never_use_a_grant_more_often_than_it_allows(turn, decide):
    first = turn(purge("/products/shoes"))
    [call] = calls_of(first)
    decide(port.approve, call.pk, actor=ALICE, remember=grants.Scope(uses=3))
    later = [_copy(call, f"/products/{i}", i) for i in range(8)]
    barrier = threading.Barrier(len(later))
    covered: list[str] = []

    def propose(one: ToolCall) -> None:
        try:
            barrier.wait()
            with transaction.atomic():
                if grants.cover(one) is not None:
                    covered.append(one.pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=propose, args=(one,)) for one in later]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(covered) == 3
    assert RememberedApproval.objects.get().uses_left == 0
    assert sorted(GrantUse.objects.values_list("tool_call_id", flat=True)) == sorted(covered)


def _copy(call: ToolCall, path: str, position: int) -> ToolCall:
    """Another call of the same tool in the same thread, stored as proposed."""
    return ToolCall.objects.create(
        id=ids.tool_call_id(),
        run_id=call.run_id,
        thread_id=call.thread_id,
        message_id=call.message_id,
        step_name="llm:9",
        position=position,
        tool_name=call.tool_name,
        kind=call.kind,
        args={"path": path},
        args_digest=call.args_digest,
        status=CallStatus.PROPOSED,
    )
