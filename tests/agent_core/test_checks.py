"""System checks of the AGENT settings."""

from __future__ import annotations

from django.core.checks import run_checks
from django.test import override_settings

from agent_core.checks import (
    check_agent_settings,
    check_approval_gate,
    check_channel_prefix,
    check_durable_chain,
)


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_the_project_settings_pass():
    assert check_agent_settings() == []
    assert check_durable_chain() == []
    assert check_approval_gate() == []


@override_settings(AGENT={"AGENTS": ["demo.agents.no_such_agent"]})
def test_an_agent_path_that_does_not_import_is_reported():
    [error] = check_agent_settings()
    assert error.id == "agent_core.E002" and "no_such_agent" in error.msg


@override_settings(AGENT={"AGENTS": ["demo.agents.support_agent"]})
def test_a_delegate_that_is_not_registered_is_reported():
    messages = check_agent_settings()
    assert ids(messages) == ["agent_core.W011", "agent_core.W011"]
    assert "'support' delegates to 'billing'" in messages[0].msg


@override_settings(AGENT={"APPROVAL_POLICY": "approvals.policy.Nope"})
def test_a_dotted_path_setting_that_does_not_import_is_reported():
    assert ids(check_agent_settings()) == ["agent_core.E003"]


@override_settings(AGENT={"RUNNR": "inline"})
def test_an_unknown_key_is_reported():
    assert ids(check_agent_settings()) == ["agent_core.E001"]


@override_settings(AGENT={"MODEL_QUEUE": " ", "TOOL_QUEUE": None})
def test_a_queue_setting_that_names_no_queue_is_reported():
    assert ids(check_durable_chain()) == ["agent_core.E010", "agent_core.E010"]


@override_settings(AGENT={"CHAIN_MAX_STEPS": 0, "CHAIN_MAX_SECONDS": -1})
def test_an_unbounded_or_empty_chain_slice_is_reported():
    errors = check_durable_chain()
    assert ids(errors) == ["agent_core.E011", "agent_core.E011"]
    assert "CHAIN_MAX_STEPS" in errors[0].msg and "CHAIN_MAX_SECONDS" in errors[1].msg


class GateWithoutRequested:
    """A project's gate written against the protocol before it had ``requested``."""

    def review(self, call, *, tool, actor, thread):
        raise AssertionError("never called by the check")

    def decidable(self, actor):
        raise AssertionError("never called by the check")


@override_settings(AGENT={"APPROVAL_GATE": "tests.agent_core.test_checks.GateWithoutRequested"})
def test_a_gate_missing_a_method_of_the_protocol_is_reported():
    # Found at `manage.py check`, not as an AttributeError in the first suspend transaction.
    [error] = check_approval_gate()
    assert error.id == "agent_core.E013"
    assert "GateWithoutRequested" in error.msg and "requested" in error.msg


def test_a_pubsub_layer_without_its_own_prefix_is_a_deploy_warning(settings):
    """Issue #35: pub/sub ignores Redis db numbers, so two deployments on one Redis saw each
    other's frames. The project's settings name a prefix; one without is warned of."""
    assert check_channel_prefix() == []
    layer = settings.CHANNEL_LAYERS["default"]
    assert layer["CONFIG"]["prefix"]
    settings.CHANNEL_LAYERS = {
        "default": {**layer, "CONFIG": {k: v for k, v in layer["CONFIG"].items() if k != "prefix"}}
    }
    assert [m.id for m in check_channel_prefix()] == ["agent_core.W014"]
    deploy = run_checks(include_deployment_checks=True)
    assert "agent_core.W014" in [m.id for m in deploy]
    assert "agent_core.W014" not in [m.id for m in run_checks()]  # not in every manage.py
