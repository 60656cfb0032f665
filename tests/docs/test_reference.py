"""The reference pages cover the code: every setting (described), system check, error code and
frame kind that the apps define is in the generated reference, and each generated page asks for
its generator."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
import textwrap
from pathlib import Path

import pytest

from docs._ext import airlock_reference as ref

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "reference"
CONF_MODULES = ("agent_core.conf", "approvals.conf", "console.conf")
CHECK_ID = re.compile(r"""id=["']((?:agent_core|approvals|console)\.[CEWI]\d{3})""")


def app_sources() -> dict[Path, str]:
    return {
        path: path.read_text()
        for app in ref.APPS
        for path in sorted((REPO / app).rglob("*.py"))
        if "migrations" not in path.parts
    }


def settings_classes() -> list[type]:
    return [
        value
        for name in CONF_MODULES
        for value in vars(importlib.import_module(name)).values()
        if isinstance(value, type)
        and dataclasses.is_dataclass(value)
        and value.__module__ == name
        and value.__name__.endswith("Settings")
    ]


def test_every_settings_class_is_in_the_reference_with_every_key_described():
    page = (REFERENCE / "settings.md").read_text()
    classes = settings_classes()
    assert len(classes) >= 4
    for cls in classes:
        assert f"{{airlock-reference}} settings {cls.__module__}.{cls.__name__}" in page, cls
        keys = [s.key for s in ref.settings_of(cls)]
        assert keys == [f.name for f in dataclasses.fields(cls)]
        table = ref.settings_markdown(f"{cls.__module__}.{cls.__name__}")
        assert all(f"`{key}`" in table for key in keys)


def test_a_setting_added_without_a_description_fails(tmp_path, monkeypatch):
    (tmp_path / "newconf.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass

            from agent_core.conf import AgentSettings


            @dataclass(frozen=True, kw_only=True)
            class MoreSettings(AgentSettings):
                DESCRIBED: int = 1  # what it does
                NEW_KNOB: int = 3
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cls = importlib.import_module("newconf").MoreSettings
    with pytest.raises(ref.MissingDescription, match="NEW_KNOB"):
        ref.settings_of(cls)


def test_a_comment_above_or_beside_a_setting_describes_it():
    source = textwrap.dedent(
        """
        class S:
            # Above,
            # on two lines.
            A: int = 1
            B: int = 2  # beside
            C: int = 3
        """
    )
    [cls] = ast.parse(source).body
    assert isinstance(cls, ast.ClassDef)
    described = ref.described_assignments(source, cls.body)
    assert described == {"A": "Above, on two lines.", "B": "beside", "C": ""}


def test_every_check_id_in_the_code_is_in_the_reference():
    found = set()
    for text in app_sources().values():
        found |= set(CHECK_ID.findall(text))
    documented = ref.checks()
    assert found and found <= set(documented), found - set(documented)
    assert all(check.messages for check in documented.values())
    assert "agent_core.W014" in documented and documented["agent_core.W014"].deploy
    # The MCP listing's messages, built by a helper of the deploy check, are deploy's too.
    listing = ["agent_core.E041", "agent_core.W040", "agent_core.W041"]
    assert [documented[i].deploy for i in [*listing, "agent_core.E040"]] == [True] * 3 + [False]


def test_every_error_code_in_the_code_is_in_the_reference():
    found = set()
    for text in app_sources().values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if (
                        isinstance(statement, ast.Assign)
                        and isinstance(statement.targets[0], ast.Name)
                        and statement.targets[0].id in ("code", "default_code")
                        and isinstance(statement.value, ast.Constant)
                    ):
                        found.add(statement.value.value)
    documented = ref.errors()
    assert found and found <= set(documented), found - set(documented)
    assert documented["approval_expired"][0] == 410
    assert all(message for _, message, _ in documented.values())


def test_every_frame_kind_in_the_code_is_in_the_reference():
    found = set()
    for text in app_sources().values():
        found |= set(re.findall(r"""Frame\(\s*["']([a-z-]+)["']""", text))
    documented = ref.frames()
    assert {"approval-requested", "finish", "approval-progress"} <= found
    assert found <= set(documented), found - set(documented)
    assert documented["approval-requested"].fields == [
        "tool_call_id",
        "approver",
        "expires_at",
        "confirmation",
    ]


def test_the_state_diagrams_are_the_transition_table():
    from agent_core.engine.state import CALL_ALLOWED, RUN_ALLOWED

    for model, table in (("Run", RUN_ALLOWED), ("ToolCall", CALL_ALLOWED)):
        arrows = {
            tuple(line.split(" --> "))
            for line in ref.state_diagram(model).splitlines()[1:]
            if "[*]" not in line
        }
        assert arrows == {(f"    {a}", str(b)) for a, b in table}


@pytest.mark.parametrize(
    ("page", "directive"),
    [
        ("checks.md", "{airlock-reference} checks"),
        ("errors.md", "{airlock-reference} errors"),
        ("frames.md", "{airlock-reference} frames"),
        ("commands.md", "{airlock-reference} commands"),
        ("rest.md", "{airlock-reference} rest"),
        ("signals.md", "{airlock-reference} signals"),
        ("state-machines.md", "{airlock-reference} state-diagram Run"),
        ("state-machines.md", "{airlock-reference} state-diagram ToolCall"),
    ],
)
def test_each_generated_page_asks_for_its_generator(page, directive):
    assert directive in (REFERENCE / page).read_text()


def test_the_rest_reference_has_the_streams_and_the_commands_their_subcommands():
    rest = ref.rest_markdown()
    assert "`GET /agent/chat/{run_id}/stream`" in rest
    assert "`POST /agent/tool-call/approve`" in rest
    assert "agent approve" in ref.commands()
    assert set(ref.signals()) >= {"approval_requested", "approval_settled", "run_finished"}
