"""Joins the migrations of threads over time, independent proposals, call amounts and the executed
args' digest, written side by side."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('agent_core', '0012_call_amount'),
        ('agent_core', '0012_executed_args_digest'),
        ('agent_core', '0012_threads_over_time'),
        ('agent_core', '0013_confirmed_calls'),
    ]

    operations = [
    ]
