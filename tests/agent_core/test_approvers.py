"""How several approver roles are joined and matched (``agent_core.approvers``), the one rule the
core's visibility filter and the approvals app's cases are built from."""

from __future__ import annotations

import re

import pytest

from agent_core import approvers

STORED = ["legal|marketing", "marketing|legal", "legal", "paralegal|x", "le.al|x", "x|legal.eu"]


@pytest.mark.parametrize("roles", [["legal"], ["legal", "x"], ["le.al"], ["legal.eu"], ["a+b"]])
def test_a_stored_approver_matches_when_one_of_its_several_roles_is_the_actors(roles):
    pattern = approvers.one_of_pattern(roles)
    assert pattern is not None
    for stored in STORED:
        several = approvers.ROLE_SEPARATOR in stored
        held = set(stored.split(approvers.ROLE_SEPARATOR)) & set(roles)
        assert (several and re.search(pattern, stored) is not None) is (several and bool(held))


def test_no_roles_match_nothing_and_the_sql_names_the_partial_indexes():
    assert approvers.one_of_pattern([]) is None
    # The exact predicate of ``call_pending_any_of_roles`` and ``call_any_of_roles_run``.
    assert approvers.one_of_sql("c", "%(p)s") == "c.approver LIKE '%%|%%' AND c.approver ~ %(p)s"
