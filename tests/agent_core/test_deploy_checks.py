"""``check --deploy``: the scripted demo model left in a production settings module."""

from __future__ import annotations

from django.core.checks import run_checks
from django.test import override_settings

SCRIPTED = "agent_core.W016"
ONE_AGENT = ["demo.agents.support_agent"]  # names no model: AGENT["MODEL"] is its model


def deploy_ids() -> list[str]:
    return [str(m.id) for m in run_checks(include_deployment_checks=True)]


@override_settings(DEBUG=False, AGENT={"AGENTS": ONE_AGENT, "MODEL": "scripted:demo"})
def test_the_scripted_model_outside_debug_is_a_deploy_warning():
    [warning] = [m for m in run_checks(include_deployment_checks=True) if m.id == SCRIPTED]
    assert "support" in warning.msg and "scripted:demo" in warning.msg
    assert SCRIPTED not in [m.id for m in run_checks()]  # plain `check` stays quiet


@override_settings(DEBUG=True, AGENT={"AGENTS": ONE_AGENT, "MODEL": "scripted:demo"})
def test_the_scripted_model_with_debug_on_is_not_reported():
    assert SCRIPTED not in deploy_ids()


@override_settings(DEBUG=False, AGENT={"AGENTS": ONE_AGENT, "MODEL": "openai:gpt-4o-mini"})
def test_a_real_model_is_not_reported():
    assert SCRIPTED not in deploy_ids()
