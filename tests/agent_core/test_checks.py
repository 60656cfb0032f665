"""System checks of the AGENT settings."""

from __future__ import annotations

from django.test import override_settings

from agent_core.checks import check_agent_settings


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_the_project_settings_pass():
    assert check_agent_settings() == []


@override_settings(AGENT={"AGENTS": ["demo.agents.no_such_agent"]})
def test_an_agent_path_that_does_not_import_is_reported():
    [error] = check_agent_settings()
    assert error.id == "agent_core.E002" and "no_such_agent" in error.msg


@override_settings(AGENT={"APPROVAL_POLICY": "approvals.policy.Nope"})
def test_a_dotted_path_setting_that_does_not_import_is_reported():
    assert ids(check_agent_settings()) == ["agent_core.E003"]


@override_settings(AGENT={"RUNNR": "inline"})
def test_an_unknown_key_is_reported():
    assert ids(check_agent_settings()) == ["agent_core.E001"]
