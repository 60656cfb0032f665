# Indexes every write kept up and no query read (issue 18): Django gives each indexed varchar
# column a second, varchar_pattern_ops index ("_like", for LIKE 'prefix%' outside the C locale),
# and these are ids, only ever matched whole; and a foreign key's own index is redundant where a
# composite index leads with its column. An approval cycle wrote 365 WAL records with them, 229
# without. Dropped concurrently: the tables keep taking writes meanwhile.

import django.db.models.deletion
from django.db import migrations, models

from agent_core.schema import dropped

# The indexes, and their "_like" twins, that a composite index covers: (table, column, the
# hash in their names). The fields' state says so below (db_index=False).
COVERED = [
    ("agent_core_message", "thread_id", "9698c994"),  # message_thread_seq_unique
    ("agent_core_run", "thread_id", "a3181279"),  # run_thread_recent
    ("agent_core_step", "run_id", "ad434e92"),  # step_run_name_unique
    ("agent_core_streamframe", "run_id", "4a333225"),  # frame_run_seq_unique
    ("agent_core_thread", "owner_ref", "32565050"),  # thread_owner_recent
    ("agent_core_toolcall", "run_id", "448703fe"),  # call_run_step
]

# The "_like" twins of the indexes kept: (table, column, the hash in its name).
TWINS = [
    ("agent_core_chatalias", "thread_id", "8c596516"),
    ("agent_core_message", "id", "5ff2292b"),
    ("agent_core_message", "run_id", "af618a0a"),
    ("agent_core_queuedmessage", "id", "149b492c"),
    ("agent_core_queuedmessage", "run_id", "21e4a02a"),
    ("agent_core_queuedmessage", "thread_id", "67f8c757"),
    ("agent_core_run", "id", "7f624e08"),
    ("agent_core_run", "parent_run_id", "4df716a6"),
    ("agent_core_run", "parent_tool_call_id", "781df0e6"),
    ("agent_core_thread", "active_run_id", "1c993e04"),
    ("agent_core_thread", "id", "2a83887a"),
    ("agent_core_toolcall", "id", "db3bbcc4"),
    ("agent_core_toolcall", "message_id", "5736e520"),
    ("agent_core_toolcall", "thread_id", "6be9a646"),
]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("agent_core", "0010_call_pending_by_time"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="thread",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="agent_core.thread",
                    ),
                ),
                migrations.AlterField(
                    model_name="run",
                    name="thread",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="runs",
                        to="agent_core.thread",
                    ),
                ),
                migrations.AlterField(
                    model_name="step",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="steps",
                        to="agent_core.run",
                    ),
                ),
                migrations.AlterField(
                    model_name="streamframe",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="frames",
                        to="agent_core.run",
                    ),
                ),
                migrations.AlterField(
                    model_name="thread",
                    name="owner_ref",
                    field=models.CharField(max_length=200),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tool_calls",
                        to="agent_core.run",
                    ),
                ),
            ],
            database_operations=dropped(COVERED, kept=False),
        ),
        *dropped(TWINS, kept=True),
    ]
