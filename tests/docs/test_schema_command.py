"""``manage.py spectacular --file``, the usual way to feed a client generator, writes the same
document as the served ``/agent/schema/``: the SSE streams included."""

from __future__ import annotations

from pathlib import Path

from django.core.checks import run_checks
from django.core.management import call_command
from django.test import override_settings

GENERATOR_CHECK = "agent_core.W015"


def test_the_schema_command_writes_the_stream_endpoints(tmp_path: Path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--file", str(out))
    text = out.read_text()
    assert "/agent/chat/{run_id}/stream:" in text
    assert "/agent/chat/{run_id}/ui-stream:" in text
    assert "text/event-stream" in text


@override_settings(SPECTACULAR_SETTINGS={"TITLE": "A project's API"})
def test_check_warns_when_the_schema_command_would_leave_the_streams_out():
    [warning] = [m for m in run_checks() if m.id == GENERATOR_CHECK]
    assert "DEFAULT_GENERATOR_CLASS" in (warning.hint or "")


def test_check_is_quiet_with_airlocks_generator():
    assert GENERATOR_CHECK not in [m.id for m in run_checks()]
