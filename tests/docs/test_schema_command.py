"""``manage.py spectacular --file``, the usual way to feed a client generator, writes the same
document as the served ``/agent/schema/``: the SSE streams included."""

from __future__ import annotations

from pathlib import Path

from django.core.management import call_command


def test_the_schema_command_writes_the_stream_endpoints(tmp_path: Path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--file", str(out))
    text = out.read_text()
    assert "/agent/chat/{run_id}/stream:" in text
    assert "/agent/chat/{run_id}/ui-stream:" in text
    assert "text/event-stream" in text
