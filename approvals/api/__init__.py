"""The decision and pending-approvals REST API (SPEC §8)."""
