"""The console around delegation (SPEC §14): the inbox card names the chain, the run page shows
the tree (its parent, its children with their status and a link)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agent_core.models import Run, ToolCall
from tests.console.conftest import REFUND, actor
from tests.factories import make_user


@pytest.fixture
def delegated(turn, people, finance_policy):
    """Support handed a refund to billing, whose refund waits on finance."""
    parent = turn(
        f"/call ask_billing {json.dumps({'message': REFUND})}", actor=actor(people["alice"])
    )
    child = Run.objects.get(parent_run=parent)
    return parent, child, ToolCall.objects.get(run=child)


def test_the_inbox_card_names_the_chain(login, delegated):
    _, _, refund = delegated
    client = login("fran")
    inbox = client.get(reverse("console:inbox")).content.decode()
    assert f'data-row="{refund.pk}"' in inbox
    assert '<span class="row-chain" data-chain>support → billing</span>' in inbox  # on its row
    card = client.get(reverse("console:call", args=[refund.pk])).content.decode()
    assert f'id="card-{refund.pk}"' in card and "support → billing" in card


def test_the_run_page_shows_the_tree(login, delegated):
    parent, child, _ = delegated
    client = login("otto")
    page = client.get(reverse("console:run", args=[parent.pk])).content.decode()
    assert reverse("console:run", args=[child.pk]) in page and "data-children" in page
    assert "billing" in page and "waiting" in page
    page = client.get(reverse("console:run", args=[child.pk])).content.decode()
    assert "data-parent-run" in page and reverse("console:run", args=[parent.pk]) in page


def test_the_run_page_names_only_the_runs_the_viewer_may_see(login, delegated):
    """Issue #35: every console fragment answers only what its viewer may see. fran decides the
    child's refund, so she sees the child run; the parent (alice's support run) is not hers."""
    parent, child, _ = delegated
    client = login("fran")
    assert client.get(reverse("console:run", args=[parent.pk])).status_code == 404
    for url in (
        reverse("console:run", args=[child.pk]),
        reverse("console:run_fragment", args=[child.pk]),
    ):
        page = client.get(url).content.decode()
        assert parent.pk not in page and "data-parent-run" not in page


def test_a_delegated_calls_card_credits_its_message_to_the_delegating_agent(login, delegated):
    _, _, refund = delegated
    card = login("fran").get(reverse("console:call", args=[refund.pk])).content.decode()
    assert "support (agent) asked" in card and "alice asked" not in card


def test_each_row_shows_its_chain_and_which_parallel_branch_it_is(
    client, turn, people, demo_policy
):
    turn('/call ask_campaign_review {"message": "spring-sale"}', actor=actor(people["alice"]))
    client.force_login(make_user("mia", "marketing", staff=True))
    inbox = client.get(reverse("console:inbox")).content.decode()
    for branch in ("legal", "brand"):
        chain = f"support → campaign_review → {branch} (branch {branch} of campaign_review)"
        assert f'<span class="row-chain" data-chain>{chain}</span>' in inbox
