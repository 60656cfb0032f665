"""System checks for what a project must add: PostgreSQL, a channel layer, the ASGI helper, the
Celery helper (each with a hint that says what to add)."""

from __future__ import annotations

import pytest
from celery import Celery
from django.test import override_settings

from agent_core.celery import with_airlock
from agent_core.checks import (
    check_asgi_helper,
    check_celery_app,
    check_channel_layer,
    check_database_engine,
)


def test_the_project_passes_them_all():
    assert check_database_engine() == []
    assert check_channel_layer() == []
    assert check_asgi_helper() == []
    assert check_celery_app() == []


def test_sqlite_is_an_error(settings):
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}
    with pytest.warns(UserWarning, match="DATABASES"):  # Django's caution; no query is made
        settings.DATABASES = {**settings.DATABASES, "default": sqlite}
    [error] = check_database_engine()
    assert error.id == "agent_core.E005" and "postgresql" in str(error.hint)


@pytest.mark.parametrize("layers", [None, {}])
def test_no_channel_layer_is_an_error(settings, layers):
    if layers is None:
        del settings.CHANNEL_LAYERS
    else:
        settings.CHANNEL_LAYERS = layers
    [error] = check_channel_layer()
    assert error.id == "agent_core.E006" and "socket_timeout" in str(error.hint)


@pytest.mark.parametrize(
    ("path", "found"),
    [
        (None, "ASGI_APPLICATION is not set"),
        ("django.core.asgi.get_asgi_application", "not built by agent_core.asgi.with_airlock"),
        ("nowhere.asgi.application", "does not import"),
    ],
)
def test_the_inline_runner_without_the_asgi_helper_is_a_warning(settings, path, found):
    settings.ASGI_APPLICATION = path
    [warning] = check_asgi_helper()
    assert warning.id == "agent_core.W007" and found in warning.msg
    assert "with_airlock(get_asgi_application())" in str(warning.hint)


@override_settings(AGENT={"RUNNER": "durable"})
def test_the_durable_runner_needs_the_project_s_celery_app_set_up_by_the_helper():
    assert check_celery_app() == []  # config/celery.py: with_airlock(app), the current app
    Celery(set_as_current=True)  # what Celery uses when the project never made one
    try:
        [error] = check_celery_app()
        assert error.id == "agent_core.E008" and "default app" in error.msg
        assert "from .celery import app as celery_app" in str(error.hint)
        bare = Celery("mysite", set_as_current=True)
        [error] = check_celery_app()
        assert "'mysite' is not set up" in error.msg
        with_airlock(bare)
        assert check_celery_app() == []
    finally:
        from config.celery import app

        app.set_current()


def test_the_durable_runner_s_checks_are_quiet_for_the_inline_runner(settings):
    Celery(set_as_current=True)
    try:
        assert check_celery_app() == []
    finally:
        from config.celery import app

        app.set_current()
