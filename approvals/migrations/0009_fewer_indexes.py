# As agent_core's 0011: the indexes a composite index covers, and the "_like" twins of ids and
# keys only ever matched whole. Dropped concurrently: the tables keep taking writes meanwhile.

import django.db.models.deletion
from django.db import migrations, models

from agent_core.schema import dropped

# The indexes, and their "_like" twins, that a composite index covers: (table, column, the
# hash in their names). The fields' state says so below (db_index=False).
COVERED = [
    ("approvals_approval", "tool_call_id", "a52d4e0b"),  # approval_call_by_unique
    ("approvals_rememberedapproval", "thread_id", "6af08d6b"),  # remembered_thread_tool
]

# The "_like" twins of the indexes kept: (table, column, the hash in its name).
TWINS = [
    ("approvals_decisionattempt", "tool_call_id", "185cb2e0"),
    ("approvals_delivery", "tool_call_id", "e343b9b4"),
    ("approvals_escalation", "tool_call_id", "1f8a559d"),
    ("approvals_linkuse", "nonce", "e10c274c"),
    ("approvals_notificationoptout", "actor_ref", "0ecd9859"),
    ("approvals_quorum", "tool_call_id", "8b609678"),
    ("approvals_rememberedapproval", "source_tool_call_id", "67e2daed"),
]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("agent_core", "0011_fewer_indexes"),
        ("approvals", "0008_delivery_sweeps"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="approval",
                    name="tool_call",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="approvals",
                        to="agent_core.toolcall",
                    ),
                ),
                migrations.AlterField(
                    model_name="rememberedapproval",
                    name="thread",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="remembered",
                        to="agent_core.thread",
                    ),
                ),
            ],
            database_operations=dropped(COVERED, kept=False),
        ),
        *dropped(TWINS, kept=True),
    ]
