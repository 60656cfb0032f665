"""Joins the nudge and skip actions' migrations and those of scoped grants, evidence and
reminders, written side by side."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0010_nudge'),
        ('approvals', '0010_skip_action'),
        ('approvals', '0013_grant_and_reminder_twins'),
    ]

    operations = [
    ]
