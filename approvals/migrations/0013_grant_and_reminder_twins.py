# As 0009: the "_like" twins of the grant uses' and the reminders' call ids (only ever matched
# whole), dropped concurrently.

from django.db import migrations

from agent_core.schema import dropped

TWINS = [
    ("approvals_grantuse", "tool_call_id", "c91352a8"),
    ("approvals_reminder", "tool_call_id", "0bff1bf5"),
]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("approvals", "0012_reminders")]

    operations = [*dropped(TWINS, kept=True)]
