"""A gate of the tests': the approvals gate, noting every call it reviews."""

from __future__ import annotations

from typing import Any, ClassVar

from agent_core.gate import Verdict
from agent_core.models import ToolCall
from approvals.gate import ApprovalGate


class RecordingGate(ApprovalGate):
    """``ApprovalGate`` that notes the id of every call it reviews in ``reviewed``."""

    reviewed: ClassVar[set[str]] = set()

    def review(self, call: ToolCall, **kwargs: Any) -> Verdict:
        RecordingGate.reviewed.add(call.pk)
        return super().review(call, **kwargs)
