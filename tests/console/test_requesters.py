"""A requester's side of the console without a browser (issue 42, item 5): bulk decisions on
their own calls, no other's call in a bulk confirmation, and My requests' live list."""

from __future__ import annotations

from django.urls import reverse

from agent_core.actors import actor_for_user
from agent_core.choices import CallStatus
from agent_core.models import ToolCall
from tests.console.test_list import _bulk

PURGE = '/call purge_cache {"path": "/blog"}'


def test_a_requester_bulk_approves_her_own_calls(login, turn, people, decide, demo_policy):
    alice = actor_for_user(people["alice"])
    purges = [ToolCall.objects.get(run=turn(PURGE, actor=alice)) for _ in range(2)]
    client = login("alice")
    assert "Approve these 2 calls?" in _bulk(client, purges).content.decode()
    done = decide(_bulk, client, purges, confirm="on")
    assert "2 of 2 approved" in done.content.decode()
    assert {ToolCall.objects.get(pk=c.pk).status for c in purges} == {CallStatus.SUCCEEDED}


def test_a_bulk_confirmation_lists_no_call_its_user_may_not_see(login, turn, people, demo_policy):
    alice = actor_for_user(people["alice"])
    purge = ToolCall.objects.get(run=turn(PURGE, actor=alice))
    response = _bulk(login("bob"), [purge])
    assert response.status_code == 400
    assert purge.pk not in response.content.decode()
    assert "None of these calls exists any more." in response.content.decode()


def test_my_requests_live_list_is_the_users_own_with_the_counts(login, turn, people, demo_policy):
    alice, bob = actor_for_user(people["alice"]), actor_for_user(people["bob"])
    hers = ToolCall.objects.get(run=turn(PURGE, actor=alice))
    his = ToolCall.objects.get(run=turn(PURGE, actor=bob))
    response = login("alice").get(reverse("console:mine_fragment"), HTTP_X_CONSOLE_FRAGMENT="1")
    html = response.content.decode()
    assert f'data-call="{hers.pk}"' in html and his.pk not in html
    assert "<nav" not in html  # the list alone, for the page to swap in
    assert response["X-Console-Counts"] == "waiting_on_you=1;in_doubt=0"  # her own purge
