"""Schemathesis hooks (``SCHEMATHESIS_HOOKS``, loaded by ``test_schema_fuzz``): besides the bodies
it generates, the fuzzer sends each spoiled with a lone surrogate (``"\\ud800"``, valid JSON that
no UTF-8 text can hold) in every string, keys too. Each must be a 400, never a 5xx (issue #35).
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import strategies as st

LONE_SURROGATE = "\ud800"


def spoiled(value: Any) -> Any:
    """``value`` with a lone surrogate after each of its strings."""
    if isinstance(value, str):
        return value + LONE_SURROGATE
    if isinstance(value, dict):
        return {spoiled(k): spoiled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [spoiled(v) for v in value]
    return value


@schemathesis.hook
def before_generate_body(context: Any, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(strategy, strategy.map(spoiled))
