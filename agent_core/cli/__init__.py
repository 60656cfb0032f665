"""Terminal helpers for ``manage.py agent``: following a run, rendering frames, ages.

The ``agent`` command itself lives in the ``approvals`` app
(``approvals/management/commands/agent.py``) because its decision subcommands go through the
approval port, and ``agent_core`` never imports ``approvals``. Everything here is core-only.
"""
