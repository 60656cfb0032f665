"""Agents of the MCP tests."""

from __future__ import annotations

from agent_core.agents import Agent

# Every tool of the tests' probe server (tests/mcp/server.py).
prober = Agent(name="prober", tools=("mcp:probe",))
