"""The decision and pending-approvals REST API (SPEC §8): views parse, call the port, shape."""
