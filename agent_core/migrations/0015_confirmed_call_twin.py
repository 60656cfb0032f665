# As 0011: the "_like" twin of the confirmed calls' nonce (only ever matched whole), dropped
# concurrently.

from django.db import migrations

from agent_core.schema import dropped

TWINS = [("agent_core_confirmedcall", "nonce", "a19d7c77")]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("agent_core", "0014_merge_threads_proposals_evidence")]

    operations = [*dropped(TWINS, kept=True)]
