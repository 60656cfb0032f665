"""The API's raw SQL statement, named (PostgreSQL only, SPEC §2), beside the core's
(``agent_core.sql``) as the approvals app keeps its own."""

from __future__ import annotations

# A token's user, whole, and the names of the user's groups (its roles) in one read
# (api.auth.TokenAuthentication): token key. Formatted once per process with the tables and
# columns of the configured token and user models.
TOKEN_USER = (
    "SELECT {columns}, ARRAY(SELECT g.{group_name} FROM {user_groups} ug"
    " JOIN {group} g ON g.{group_pk} = ug.{group_fk} WHERE ug.{user_fk} = u.{user_pk})"
    " FROM {token} t JOIN {user} u ON u.{user_pk} = t.{token_user_fk} WHERE t.{token_key} = %s"
)
