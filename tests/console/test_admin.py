"""The models in the Django admin: read-only, linked into the console."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from agent_core.models import ToolCall
from approvals.models import Delivery
from tests.console.conftest import REFUND, actor


@pytest.fixture
def admin_client(client, people, turn):
    turn(REFUND, actor=actor(people["alice"]))
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


@pytest.mark.parametrize(
    "model",
    [
        "agent_core/thread",
        "agent_core/run",
        "agent_core/message",
        "agent_core/toolcall",
        "agent_core/step",
        "agent_core/streamframe",
        "approvals/decisionattempt",
        "approvals/rememberedapproval",
        "approvals/delivery",
    ],
)
def test_every_model_is_listed_and_read_only(admin_client, model):
    url = f"/admin/{model}/"
    assert admin_client.get(url).status_code == 200
    assert admin_client.get(url + "add/").status_code == 403


def test_a_call_links_into_the_console_and_cannot_be_changed(admin_client):
    call = ToolCall.objects.get()
    response = admin_client.get(reverse("admin:agent_core_toolcall_change", args=[call.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert reverse("console:run", args=[call.run_id]) in html
    assert 'name="_save"' not in html
    posted = admin_client.post(
        reverse("admin:agent_core_toolcall_change", args=[call.pk]), {"status": "approved"}
    )
    assert posted.status_code == 403
    call.refresh_from_db()
    assert call.status == "pending_approval"
    assert (
        admin_client.post(reverse("admin:agent_core_toolcall_delete", args=[call.pk])).status_code
        == 403
    )


def test_a_delivery_shows_how_often_the_sweep_queued_it_again(admin_client):
    # Each sweep doubles the wait before the next attempt: an operator reading a late
    # notification's row sees why it is late.
    Delivery.objects.create(
        tool_call=ToolCall.objects.get(), event="approval-requested", channel="webhook", sweeps=3
    )
    html = admin_client.get(reverse("admin:approvals_delivery_changelist")).content.decode()
    assert '<td class="field-sweeps">3</td>' in html
