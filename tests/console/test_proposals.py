"""The console shows independent proposals (SPEC §17) with their mode; a superseded one is
greyed out in the run view."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agent_core.choices import CallStatus
from tests.approvals.test_independent import follow_up, proposal_of
from tests.console.conftest import actor, card_html

pytestmark = pytest.mark.django_db


def test_proposals_show_their_mode_and_a_superseded_one_is_greyed_out(turn, people, login):
    alice = actor(people["alice"])
    first = turn(follow_up(send_on="2026-12-24"), actor=alice)
    older = proposal_of(first)
    newer = proposal_of(
        turn(follow_up(send_on="2026-12-27"), actor=alice, thread_id=first.thread_id)
    )
    older.refresh_from_db()
    assert older.status == CallStatus.SUPERSEDED
    client = login("otto")  # an operator sees every run
    turn_page = client.get(reverse("console:run", args=[first.pk])).content.decode()
    assert f'class="proposal is-superseded" data-proposal="{older.pk}"' in turn_page
    assert "independent proposal" in turn_page
    superseded = client.get(reverse("console:run", args=[older.run_id])).content.decode()
    assert 'class="call is-superseded"' in superseded
    assert 'data-mode="independent"' in superseded
    pending = client.get(reverse("console:run", args=[newer.run_id])).content.decode()
    assert "is-superseded" not in pending and "independent proposal" in pending
    assert 'data-mode="independent"' in card_html(client, newer)
