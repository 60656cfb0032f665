"""Where a step runs under the durable runner (SPEC §6, §12): one rule for every step.

Model steps run on ``AGENT["MODEL_QUEUE"]``. A tool runs on its own ``queue`` when it names
one; otherwise reads, atomic actions (their effects live in this database) and human tools stay
where the model step runs, so a task takes them in the same chain, and every other action goes
to ``AGENT["TOOL_QUEUE"]``, where the workers that hold its credentials listen.
"""

from __future__ import annotations

from ..agents import Agent
from ..conf import agent_settings
from ..exceptions import ToolNotFound


def queue_of(agent: Agent, tool_name: str | None = None) -> str:
    """The queue of a model step (``tool_name`` None) or of a step of that tool."""
    settings = agent_settings()
    if tool_name is None:
        return settings.MODEL_QUEUE
    try:
        tool = agent.get_tool(tool_name)
    except ToolNotFound:
        return settings.MODEL_QUEUE  # nothing will run: the call fails where the run is
    if tool.queue:
        return tool.queue
    if tool.kind == "action" and not tool.atomic:
        return settings.TOOL_QUEUE
    return settings.MODEL_QUEUE
