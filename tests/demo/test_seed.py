"""``manage.py seed_demo_grant`` seeds a narrowed grant and the evidence of its decision, once."""

from __future__ import annotations

import io

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from agent_core.choices import CallStatus
from approvals.models import Action, DecisionAttempt, RememberedApproval

# Real commits: the seeding drives its run after each commit, as it does in the demo.
pytestmark = pytest.mark.django_db(transaction=True)


@override_settings(AGENT={**settings.AGENT, "APPROVAL_POLICY": "demo.policy.DemoPolicy"})
def test_the_demo_has_a_narrowed_grant_and_its_evidence():
    call_command("seed_demo", stdout=io.StringIO())
    for _ in range(2):
        call_command("seed_demo_grant", stdout=io.StringIO())
    grant = RememberedApproval.objects.get()
    assert (grant.tool_name, grant.arg_pins, grant.uses, grant.uses_left) == (
        "purge_cache",
        {"path": "/products/*"},
        5,
        5,
    )
    assert grant.source_tool_call is not None
    assert grant.source_tool_call.status == CallStatus.SUCCEEDED
    approval = DecisionAttempt.objects.get(action=Action.APPROVE)
    assert approval.card_digest and approval.policy_digest and approval.args_digest
    assert approval.seq == 1
