"""A thread over time: turns sent while the agent works, idempotent starts, fork / truncate /
regenerate, deleting old threads (SPEC §8, §16)."""
