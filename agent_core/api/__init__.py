"""The chat REST API (SPEC §8): views parse, call services, shape output."""
