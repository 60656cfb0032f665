# Concurrently: the tool-call table keeps taking writes while the index is built.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("agent_core", "0009_visibility_by_run"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="toolcall",
            index=models.Index(
                condition=models.Q(("status__in", ["pending_approval", "pending_input"])),
                fields=["requested_at", "id"],
                include=("status", "approver", "requester_ref", "run", "thread"),
                name="call_pending_by_time",
            ),
        ),
    ]
