"""Declarative rules: parsing, matching, and the system checks that report mistakes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q
from django.test import override_settings

from approvals.checks import check_approvals_settings, check_policy_mirrors_its_rules
from approvals.policy import ApprovalPolicy, Requirement
from approvals.rules import parse_rules, requirement_from_rules

RULES = {
    "issue_refund": [
        {"when": {"amount__lte": 20}, "required": False},
        {"when": {"amount__gt": 100}, "approver": "finance", "ttl": 3600},
        {"approver": "requester", "ttl": timedelta(days=1)},
    ],
    "send_campaign": {"approver": "marketing"},
    "*": {"when": {"region__in": ["eu", "uk"]}, "approver": "dpo"},
}


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("issue_refund", {"amount": "5.00"}, Requirement(required=False)),
        ("issue_refund", {"amount": 20}, Requirement(required=False)),
        (
            "issue_refund",
            {"amount": "150"},
            Requirement(approver="finance", ttl=timedelta(hours=1)),
        ),
        ("issue_refund", {"amount": 50}, Requirement(ttl=timedelta(days=1))),
        ("issue_refund", {"amount": "n/a"}, Requirement(ttl=timedelta(days=1))),
        ("issue_refund", {}, Requirement(ttl=timedelta(days=1))),
        ("send_campaign", {"campaign_id": "x"}, Requirement(approver="marketing")),
        ("purge_cache", {"region": "eu"}, Requirement(approver="dpo")),
        ("purge_cache", {"region": "us"}, None),
    ],
)
def test_the_first_matching_rule_decides(tool, args, expected):
    with override_settings(APPROVALS={"RULES": RULES}):
        assert requirement_from_rules(tool, args) == expected


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"t": {"approver": ""}}, "approver"),
        ({"t": {"when": {"amount__between": 1}}}, "unknown operator"),
        ({"t": {"when": {"region__in": "eu"}}}, "needs a list"),
        ({"t": {"ttl": "1h"}}, "seconds or a timedelta"),
        ({"t": {"ttl": -5}}, "positive"),
        ({"t": {"required": "no"}}, "True or False"),
        ({"t": {"approvers": "x"}}, "unknown keys"),
        ({"t": ["not a dict"]}, "must be a dict"),
    ],
)
def test_bad_rules_are_reported_by_the_system_check(rules, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        parse_rules(rules)
    with override_settings(APPROVALS={"RULES": rules}):
        [error] = check_approvals_settings()
    assert error.id == "approvals.E002" and message in error.msg


def test_unknown_approvals_keys_are_reported():
    with override_settings(APPROVALS={"RULE": {}}):
        [error] = check_approvals_settings()
    assert error.id == "approvals.E001"
    with override_settings(APPROVALS={"REMEMBER_TTL": "forever"}):
        [error] = check_approvals_settings()
    assert error.id == "approvals.E001"
    assert check_approvals_settings() == []


class OnlyAdminsDecide(ApprovalPolicy):
    def can_decide(self, actor, call):
        return actor.has_role("admin")


class OnlyAdminsDecideMirrored(OnlyAdminsDecide):
    def decidable(self, actor):
        return Q(status="pending_approval") if actor.has_role("admin") else Q(pk__in=[])


def test_a_policy_that_overrides_can_decide_without_its_query_mirror_is_warned_about():
    path = "tests.approvals.test_rules.OnlyAdminsDecide"
    with override_settings(AGENT={"APPROVAL_POLICY": path}):
        [warning] = check_policy_mirrors_its_rules()
    assert warning.id == "approvals.W001"
    with override_settings(AGENT={"APPROVAL_POLICY": path + "Mirrored"}):
        assert check_policy_mirrors_its_rules() == []
    assert check_policy_mirrors_its_rules() == []


def test_a_call_that_needed_no_approval_is_its_requesters_to_resolve():
    from agent_core.actors import Actor
    from agent_core.models import ToolCall
    from approvals.policy import ApprovalPolicy

    call = ToolCall(approver="", requester_ref="user:alice")
    assert ApprovalPolicy().can_decide(Actor("user:alice"), call)
    assert not ApprovalPolicy().can_decide(Actor("user:bob", frozenset({""})), call)
